import os
import sys

from trainer.cli import main

code = main()
if code:
    # After a failed collective, TensorFlow's and Keras' teardown can print
    # noise or block: leave at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)

import sys

from trainer import scratch
from trainer.cli import main

scratch.use_own_directory()
code = main()
if code:
    # After a failed collective, TensorFlow's and Keras' teardown can print
    # noise or block: leave at once.
    scratch.leave(code)
sys.exit(code)

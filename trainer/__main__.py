import sys

from trainer import scratch
from trainer.cli import main
from trainer.errorfile import write_error

scratch.use_own_directory()
try:
    code = main()
except Exception as error:  # the cause, for every node's log (RENDEZVOUS_ERROR_FILE)
    write_error(type(error).__name__, str(error), error)
    raise
if code:
    # After a failed collective, TensorFlow's and Keras' teardown can print
    # noise or block: leave at once.
    scratch.leave(code)
sys.exit(code)

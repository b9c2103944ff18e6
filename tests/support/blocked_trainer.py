"""The trainer's SIGTERM handling (trainer.train.exit_on_sigterm) in a process whose main
thread is blocked inside TensorFlow, as a step waiting on a collective whose peer died is:
a dequeue from an empty queue, which no signal interrupts. Prints "blocked" first."""

import sys

from trainer import train
from trainer._keras import tf

queue = tf.queue.FIFOQueue(1, tf.float32)
train.exit_on_sigterm()
print("blocked", flush=True)
queue.dequeue()
print("dequeued: this never happens", flush=True)
sys.exit(0)

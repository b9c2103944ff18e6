"""The parts of `bench/compare.py`.

figures   pure: what the started commands recorded, /proc parsing, summaries, ratios,
          targets and the comparison with a baseline result
markdown  pure: the report as Markdown
machine   the machine and the versions a result was measured with
install   the programs the agents run: this checkout as a wheel in a venv of its own
places    where agents run: loopback addresses or network namespaces
agents    starting rendezvous / torchrun agents and the trainer, reading what they recorded
measure   the measurements themselves, one function per part of the report
"""

NAME = "neighbour"

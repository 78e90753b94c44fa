"""What nodes say to each other and to their driver: node addresses, messages (requests and
replies) with the one byte count, and the effects a node's loop yields.

Free of transport: both drivers (the simulator and the Ray engine) carry these types; the
nodes and policies produce and consume them.
"""

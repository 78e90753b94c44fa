"""A multi-host Ray cluster on one machine: network namespaces with shaped links (`recsync
box`)."""

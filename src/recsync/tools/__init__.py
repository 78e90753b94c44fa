"""Tools beside the product: the multi-host box (box/)."""

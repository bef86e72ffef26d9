"""Board-level RTL: an 8N1 UART and a transaction harness that runs any pipeline block over it."""

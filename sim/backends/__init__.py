"""The simulation backends, each one object behind the harness's ``Backend`` interface."""

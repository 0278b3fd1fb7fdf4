"""The protocol edges: every registered wire protocol mounted on one generic client edge (auth,
session registry, admission, the relay to a worker, worker loss), its taps and its worker link."""

import os
import sys

# torch's spinning OpenMP threads slow CPU generation several-fold on small, shared machines.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from app.cli import main  # noqa: E402  (after the environment is set, before torch loads)

sys.exit(main())

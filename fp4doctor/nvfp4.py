"""The NVFP4 reference library under its public name: `from fp4doctor import nvfp4`.

The code lives with the smoke stage that uses it, in `fp4doctor/smoke/nvfp4.py` (it needs
torch, which the pure modules here never import); this module only re-exports it, so user code
and the README's example keep the short import.
"""

from fp4doctor.smoke.nvfp4 import *  # noqa: F403  (the public names, listed in its __all__)
from fp4doctor.smoke.nvfp4 import __all__ as __all__

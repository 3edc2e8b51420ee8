# The package is the native extension `monoflake._monoflake` (python/src, built by maturin),
# re-exported here; the stubs beside this file (`__init__.pyi`) describe it. Nothing else
# lives on the Python side.
from . import _monoflake
from ._monoflake import *  # noqa: F403
from ._monoflake import __all__, __version__

__doc__ = _monoflake.__doc__

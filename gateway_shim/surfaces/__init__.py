"""Surface adapters (design §7): parse a canonical body, render a composition.

Pure: no I/O, no clock, no randomness. Each surface module exports its own
``parse_*``/``format_*`` pair; the surface-independent model is re-exported here.

- ``daily``     ``daily.v1``                         (``parse_daily``)
- ``weekly``    ``weekly.v1``                        (``parse_weekly``)
- ``card``      the host's adaptive card payload and its eligibility
- ``dual``      ``adaptive.dualcoachtest.card.v1``   (``parse_dual_body``)
- ``physique``  ``adaptive.physique.card.v1``        (``parse_physique_body``)
- ``adaptive``  ``parse_adaptive``: either card, by the deployed profile's surface
                (or the body's grammar); ``presented_host_text``
"""

from gateway_shim.surfaces import _model
from gateway_shim.surfaces._model import *  # noqa: F403  (the model's public names, listed there)

__all__ = _model.__all__

"""Every Level Zero type l0mem uses, under its C name.

Handles and scalar typedefs come from :mod:`l0mem._ze.scalars`, enumerations
(``enum.IntEnum`` classes plus each member at module level) from
:mod:`l0mem._ze.enums`, structs from :mod:`l0mem._ze.structs`. Import this
module as ``T`` and write ``T.ze_device_properties_t()`` or
``T.ZE_RESULT_SUCCESS``.
"""

from __future__ import annotations

from l0mem._ze.enums import *  # noqa: F403
from l0mem._ze.scalars import *  # noqa: F403
from l0mem._ze.structs import *  # noqa: F403

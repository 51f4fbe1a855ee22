"""Each operation's outcomes, declared beside the others' (one module an operation; a recover's
with the rollback's, ``check``'s and ``probe``'s with the removal's) and registered together
when any of them is first imported: a snapshot's note may name any of them.

They sit below the operations, not in them: the results and the trial verdict that every
operation shares name some of them.
"""

from __future__ import annotations

from safeuninstall.base.outcome import register
from safeuninstall.operations.endings.bisect import BISECT
from safeuninstall.operations.endings.rollback import RECOVER, ROLLBACK
from safeuninstall.operations.endings.run import RUN
from safeuninstall.operations.endings.trial import TRY
from safeuninstall.operations.endings.uninstall import UNINSTALL

register(UNINSTALL, ROLLBACK, RECOVER, RUN, BISECT, TRY)

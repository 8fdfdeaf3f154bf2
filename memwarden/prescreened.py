"""Whether the activity may reuse the screening the API made before it parked a candidate.

Why a rule of its own: the detectors cost a few milliseconds of CPU per write, and the API already ran
them (it parks only what passed, `api.prescreen`). Reusing its codes is safe only for the very text
they were made for, so the screening is taken only when the parked content hashes to the input's
`content_hash`, the hash the API computed of the text it screened. Anything else (an input without
one, a parked text that differs) is screened again here. The gate still decides in the activity.
"""

from __future__ import annotations

from memwarden.records import RememberInput, Screening, content_hash


def prescreened(candidate: RememberInput, content: str) -> Screening | None:
    """The API's screening of `content`, or None when the activity must screen it itself."""
    if candidate.screening is None or content_hash(content) != candidate.content_hash:
        return None
    return candidate.screening

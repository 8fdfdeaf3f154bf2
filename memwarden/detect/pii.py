"""PII as ARCHITECTURE.md defines it: direct identifiers and account numbers, nothing more.

e-mail addresses, phone numbers, payment cards, government ids, bank accounts, IP addresses and
street addresses. A city, an employer or a preference is not PII and is not flagged.

presidio-analyzer's recognizers do the matching (checksums for cards, IBANs and NHS numbers,
python-phonenumbers for phones), run by an `AnalyzerEngine` with presidio's `NoOpNlpEngine`: no spaCy
model is loaded or downloaded. Because a no-op engine yields no tokens, presidio's lemma-based context
enhancer cannot see context words, so `_WindowContext` looks for them in the raw text around a match.
Weak patterns (a bare 9-digit number could be anything) only count with such context.

Offline: presidio's e-mail recognizer validates the domain with `tldextract`, whose default extractor
downloads the public suffix list on first use. We replace that with an extractor that never fetches
(`suffix_list_urls=()`, no cache dir) and reads the snapshot shipped inside the tldextract wheel.

Decisions: only *global* IP addresses count (private, loopback, link-local and documentation ranges
identify no one), and a dotted quad introduced by "version"/"build"/"firmware" is a version number.
Postcodes, ZIP codes and street names without a house number are not street addresses.

presidio is imported lazily (it imports spaCy the library: ~1 s); call `warm_up()` at worker start.
"""

from __future__ import annotations

import copy
import ipaddress
import re
import threading
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from memwarden.detect._prefilter import Prefilter, pattern_literals
from memwarden.detect._text import strip_invisible


class PiiType(StrEnum):
    """The contract's PII categories; per-type policy (reject or redact) is keyed on these."""

    EMAIL = "email"
    PHONE = "phone"
    PAYMENT_CARD = "payment_card"
    GOVERNMENT_ID = "government_id"
    BANK_ACCOUNT = "bank_account"
    IP_ADDRESS = "ip_address"
    STREET_ADDRESS = "street_address"


ENTITY_CATEGORY: dict[str, PiiType] = {
    "EMAIL_ADDRESS": PiiType.EMAIL,
    "EMAIL_OBFUSCATED": PiiType.EMAIL,
    "PHONE_NUMBER": PiiType.PHONE,
    "CREDIT_CARD": PiiType.PAYMENT_CARD,
    "IBAN_CODE": PiiType.BANK_ACCOUNT,
    "US_BANK_NUMBER": PiiType.BANK_ACCOUNT,
    "BANK_ACCOUNT": PiiType.BANK_ACCOUNT,
    "IP_ADDRESS": PiiType.IP_ADDRESS,
    "US_SSN": PiiType.GOVERNMENT_ID,
    "US_ITIN": PiiType.GOVERNMENT_ID,
    "US_PASSPORT": PiiType.GOVERNMENT_ID,
    "UK_NINO": PiiType.GOVERNMENT_ID,
    "UK_NHS": PiiType.GOVERNMENT_ID,
    "PASSPORT": PiiType.GOVERNMENT_ID,
    "DRIVER_LICENSE": PiiType.GOVERNMENT_ID,
    "NATIONAL_ID": PiiType.GOVERNMENT_ID,
    "STREET_ADDRESS": PiiType.STREET_ADDRESS,
}
"""The entity allow-list: presidio entities we ask for, and the category each one reports as."""

SCORE_THRESHOLDS: dict[str, float] = {"default": 0.4, "IP_ADDRESS": 0.5, "STREET_ADDRESS": 0.5}
"""Minimum score per entity. Weak presidio patterns (0.05-0.3) pass only when context lifts them to 0.4."""

_CONTEXT_WINDOW_BEFORE = 48
_CONTEXT_WINDOW_AFTER = 24
_CONTEXT_BOOST = 0.35

# Context words for presidio's weak recognizers, narrowed: presidio's defaults include words such as
# "save", "check" and "us" that make ordinary numbers look like bank accounts or passports.
_NARROW_CONTEXT: dict[str, list[str]] = {
    "US_BANK_NUMBER": ["account number", "account no", "acct", "bank account", "checking account", "savings account"],
    "US_PASSPORT": ["passport", "travel document"],
    "US_SSN": ["ssn", "social security", "social security number"],
    "US_ITIN": ["itin", "taxpayer identification", "individual taxpayer"],
}

# --- street addresses: presidio has no recognizer for them --------------------------------------------------

_SUFFIX = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Terrace|Ter|Way|Close"
    r"|Crescent|Cres|Parkway|Pkwy|Highway|Hwy|Square|Sq|Circle|Cir|Trail|Trl|Row|Mews|Gardens|Gdns|Grove|Hill|Walk"
    r"|Wharf|Quay|Alley|Plaza|Esplanade|Promenade|Parade)"
)
_ANGLO = (
    r"(?<![\w/.-])\d{1,5}[A-Za-z]?(?:-\d{1,5})?,?\s+"
    r"(?:(?:N|S|E|W|NE|NW|SE|SW|North|South|East|West)\.?\s+)?"
    r"(?:(?:[A-Z][\w'’.-]*|\d{1,3}(?:st|nd|rd|th))\s+){1,4}"
    rf"{_SUFFIX}\b"
    r"(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\b)?"
    r"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|#)\.?\s*[\w-]+)?"
    r"|(?<![\w/.-])\d{1,5}[A-Za-z]?\s+Broadway\b"
)
_ANGLO_NOT = re.compile(r"\b(?:Supreme|High|Crown|Food|Tennis|Basketball|County|District|Federal|Appeals) Court\b")
_GERMANIC = (
    r"\b(?:[A-ZÄÖÜ][\wäöüß-]*\s+)?"
    r"(?:[A-ZÄÖÜ][\wäöüß-]*(?i:straße|strasse|str\.|weg|gasse|platz|allee|ring|damm|ufer|chaussee|steig|straat|laan"
    r"|gracht|plein|kade|singel|dijk|vej|gatan|gata|veien)|(?:Str\.|Straße|Strasse))"
    r"\s+\d{1,4}(?:\s?[a-z])?\b"
)
_ROMANCE_FR = (
    r"(?<![\w/.-])\d{1,4}(?:\s?(?:bis|ter))?,?\s+(?i:rue|avenue|av\.|boulevard|bd|place|chemin|allée|impasse|quai|route"
    r"|cours|passage)\s+(?:(?i:de\s+la|de\s+l'|du|des|de|d')\s*)?[A-ZÀ-Ý][\w'’-]+"
)
_ROMANCE_SOUTH = (
    r"\b(?:Calle|C/|Avenida|Avda\.|Paseo|Plaza|Carrer|Via|Viale|Piazza|Corso|Largo|Rua|Travessa)\s+"
    r"(?:(?:de|del|de la|dos|das|do|di|della|dei)\s+)?[A-ZÀ-Ý][\w'’-]+(?:\s+[A-ZÀ-Ý][\w'’-]+){0,2},?\s*"
    r"(?:n[º°o]\.?\s*)?\d{1,4}\b"
)
_PO_BOX = r"(?i:\b(?:P\.?\s?O\.?\s*Box|Post\s+Office\s+Box|Postfach|Apartado)\s+\d{1,7}\b)"

# --- identifiers that are only reliable next to their label -------------------------------------------------

_LABEL_TAIL = r"\s*(?:number|no\.?|num|#|nr\.?)?\s*(?:is|:|=|#)?\s*"

_NOT_A_MAILBOX = (
    r"(?:look|looked|looking|arrive|arrived|arriving|stay|stayed|staying|be|is|are|was|were|am|work|works|worked"
    r"|working|live|lives|lived|meet|met|me|us|him|her|them|it|up|back|shop|shopped|shopping|buy|bought|order"
    r"|ordered|found|posted|see|seen|visit|visited|check|checked|sign|signed|log|logged|here|there|home|born"
    r"|available|listed|hosted|online|sold|read|go|went|going|get|got|one|two|three|time|times|least|most)"
)
"""Words that stand before "at" in prose ("look at example dot com"), never as the name of a mailbox."""
_NOT_A_DOMAIN = r"(?:the|a|an|my|your|his|her|our|their|this|that|some|any|home|work|night|noon|least|most|all|once)"
_TLD = (
    r"(?:com|org|net|edu|gov|mil|int|io|co|uk|de|fr|info|biz|me|us|ca|au|in|nl|es|it|ch|se|no|dk|fi|be|at|jp"
    r"|cn|br|ru|pl|pt|ie|nz|za|mx|ar|app|dev|ai|xyz|online|email|mail)"
)
_SPELLED_EMAIL = (
    rf"\b(?!{_NOT_A_MAILBOX}\b)[a-z0-9][a-z0-9_+-]{{0,63}}"
    r"(?:\s+(?:dot|underscore|dash|hyphen|period|plus)\s+[a-z0-9][a-z0-9_+-]{0,63}){0,4}"
    rf"\s+(?:at|@)\s+(?!{_NOT_A_DOMAIN}\b)[a-z0-9][a-z0-9-]{{0,62}}"
    rf"(?:\s+dot\s+[a-z0-9][a-z0-9-]{{0,62}}){{0,3}}?\s+dot\s+{_TLD}\b"
)
"""An address spelled out to get past a filter: "alice dot smith at gmail dot com". Each part is bounded,
so the pattern stays linear-time."""
_LABELLED: tuple[tuple[str, str, float], ...] = (
    ("PASSPORT", rf"(?i:passport){_LABEL_TAIL}(?P<v>(?=[A-Za-z0-9]*\d{{5}})[A-Za-z0-9]{{6,9}})\b", 0.6),
    (
        "DRIVER_LICENSE",
        rf"(?i:driv(?:er'?s?|ing)\s+licen[cs]e){_LABEL_TAIL}(?P<v>(?=[A-Za-z0-9-]*\d{{4}})[A-Za-z0-9-]{{5,18}})\b",
        0.6,
    ),
    (
        "NATIONAL_ID",
        r"(?i:national\s+id(?:entity)?(?:\s+card)?|identity\s+card|id\s+card|personalausweis|social\s+insurance"
        rf"|tax\s+id(?:entification)?|steuer-?id){_LABEL_TAIL}(?P<v>(?=[A-Za-z0-9-]*\d{{5}})[A-Za-z0-9-]{{6,20}})\b",
        0.6,
    ),
    (
        "BANK_ACCOUNT",
        rf"(?i:(?:bank\s+|checking\s+|savings\s+|current\s+)?(?:account|acct|a/c)){_LABEL_TAIL}(?P<v>\d{{6,17}})\b",
        0.6,
    ),
    (
        "EMAIL_OBFUSCATED",
        # starts only where a run of mailbox characters starts: an unanchored `[\w.+-]+` is quadratic on "1.1."
        r"(?<![\w.+-])[\w.+-]{1,64}\s*(?:\[at\]|\(at\)|\{at\}|<at>)\s*[\w-]+(?:\s*(?:\[dot\]|\(dot\)|\{dot\}|<dot>)\s*[\w-]+)+",
        0.6,
    ),
    ("BANK_ACCOUNT", r"(?i:sort\s*code)\s*(?:is|:)?\s*(?P<v>\d{2}[- ]?\d{2}[- ]?\d{2})\b", 0.6),
    ("EMAIL_OBFUSCATED", rf"(?i){_SPELLED_EMAIL}", 0.6),
)

_PHONE_REGIONS = ("US", "GB", "DE", "FR", "IN", "AU")
"""National formats recognised without a +country prefix; each region costs ~0.05 ms per 200 characters."""

_MAY_HOLD_PII = re.compile(r"[\d@:]|\[at\]|\(at\)|\{at\}|<at>|(?i:\sdot\s)")
"""What every recognizer above needs somewhere in the text: a digit (as `\\d` reads it, Unicode digits
included; phonenumbers reads them the same way), an `@`, a colon (an IPv6 address may be all hex
letters), an obfuscated "at" or a spelled-out " dot ". Text with none of them cannot match, so presidio is
not asked: most conversational memories hold no digit (98% of LoCoMo's turns), and presidio is the
detectors' largest cost."""

_PHONE_CANDIDATE = re.compile(r"\+?\(?\d{1,5}\)?(?:(?:[ \t.\-/]{1,2}|(?<=\)))\(?\d{2,6}\)?){1,6}|\d{6,15}")
"""Where a phone number may be: groups of digits (all but the first at least two long) split by one or two
separators, or one solid run. Linear: every repetition is bounded. phonenumbers' own matcher
is super-linear on long digit-and-punctuation runs ("1.1.1.", "/1/1"), so it only ever sees a bounded
window around each candidate."""

_PHONE_WINDOW_PAD = 8
"""Characters of context kept on each side of a candidate: phonenumbers looks at the characters around a
number to tell it from part of a longer token."""

_PHONE_MIN_DIGITS = 7
"""Fewer digits than this is no phone number in the supported regions (a price, a date, a room)."""

_MAX_PHONE_WINDOWS = 8
"""Candidates examined per text. A text denser in digit runs than this is a table, not a message: its
first candidates are still read, and its other PII entities are found as usual."""

_VERSION_BEFORE = re.compile(r"(?i)(?:version|ver\.?|v|release|build|firmware|fw|rev\.?)\s*$")


@dataclass(frozen=True)
class PiiFinding:
    """Where a PII entity is, by offsets and type; deliberately holds no matched text."""

    entity: str
    category: PiiType
    start: int
    end: int
    score: float


class _Engine:
    """The presidio analyzer, built once on first use (thread-safe)."""

    _lock = threading.Lock()
    _analyzer: Any = None

    @classmethod
    def get(cls) -> Any:
        if cls._analyzer is None:
            with cls._lock:
                if cls._analyzer is None:
                    cls._analyzer = _build_analyzer()
        return cls._analyzer


def _build_analyzer() -> Any:
    import tldextract
    from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerRegistry, RecognizerResult
    from presidio_analyzer.context_aware_enhancers import ContextAwareEnhancer
    from presidio_analyzer.nlp_engine import NoOpNlpEngine
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        NhsRecognizer,
        PhoneRecognizer,
        UkNinoRecognizer,
        UsBankRecognizer,
        UsItinRecognizer,
        UsPassportRecognizer,
        UsSsnRecognizer,
    )

    offline_tld = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)

    class OfflineEmailRecognizer(EmailRecognizer):
        """presidio's e-mail recognizer, validating the domain against the bundled suffix snapshot."""

        def validate_result(self, pattern_text: str) -> bool:
            return offline_tld(pattern_text.rsplit("@", 1)[-1]).suffix != ""

    class RegexRecognizer(EntityRecognizer):
        """Reports the span of group `v` (or the whole match), so redaction removes the value, not its label."""

        def __init__(self, entity: str, patterns: list[tuple[str, float]]) -> None:
            super().__init__(supported_entities=[entity], name=f"memwarden_{entity.lower()}", supported_language="en")
            self._patterns = [(re.compile(p), s) for p, s in patterns]
            self._words = Prefilter([pattern_literals(p) for p, _ in self._patterns])
            """A pattern whose words a text lacks cannot match it, and is not run (`_prefilter`)."""

        def load(self) -> None:
            return None

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list[Any]:
            out = []
            for (pattern, score), possible in zip(self._patterns, self._words.possible(text), strict=True):
                if not possible:
                    continue
                for m in pattern.finditer(text):
                    span = m.span("v") if "v" in pattern.groupindex else m.span()
                    if self.supported_entities[0] == "STREET_ADDRESS" and _ANGLO_NOT.search(m.group(0)):
                        continue
                    out.append(
                        RecognizerResult(
                            entity_type=self.supported_entities[0],
                            start=span[0],
                            end=span[1],
                            score=score,
                            recognition_metadata={
                                RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                            },
                        )
                    )
            return out

    class WindowContext(ContextAwareEnhancer):
        """Context words found near a match (raw text, no tokens needed) lift a weak score to the threshold."""

        def __init__(self) -> None:
            super().__init__(_CONTEXT_BOOST, 0.4, 0, 0)
            self._cache: dict[tuple[str, ...], re.Pattern[str]] = {}

        def _regex(self, words: list[str]) -> re.Pattern[str]:
            key = tuple(words)
            if key not in self._cache:
                alts = "|".join(re.escape(w.lower()) for w in sorted(words, key=len, reverse=True))
                self._cache[key] = re.compile(rf"(?<![a-z])(?:{alts})(?![a-z])")
            return self._cache[key]

        def enhance_using_context(
            self,
            text: str,
            raw_results: list[Any],
            nlp_artifacts: Any,
            recognizers: list[Any],
            context: list[str] | None = None,
        ) -> list[Any]:
            by_id = {r.id: r for r in recognizers}
            lowered = text.lower()
            for result in raw_results:
                if result.score >= 1.0:
                    continue
                rec = by_id.get(result.recognition_metadata.get(RecognizerResult.RECOGNIZER_IDENTIFIER_KEY))
                words = list(getattr(rec, "context", None) or []) + list(context or [])
                if not words:
                    continue
                window = (
                    lowered[max(0, result.start - _CONTEXT_WINDOW_BEFORE) : result.start]
                    + " | "
                    + lowered[result.end : result.end + _CONTEXT_WINDOW_AFTER]
                )
                if self._regex(words).search(window):
                    result.score = min(1.0, max(result.score + self.context_similarity_factor, 0.4))
            return raw_results

    class WindowedPhoneRecognizer(PhoneRecognizer):
        """presidio's phone recognizer, run on bounded windows around candidate digit runs: linear time."""

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list[Any]:
            results: dict[tuple[int, int], Any] = {}
            read: dict[str, list[Any]] = {}  # window text -> its results: a repeated window is read once
            candidates = (m for m in _PHONE_CANDIDATE.finditer(text) if _digits(m.group(0)) >= _PHONE_MIN_DIGITS)
            for n, m in enumerate(candidates):
                if n >= _MAX_PHONE_WINDOWS:
                    break
                lo, hi = max(0, m.start() - _PHONE_WINDOW_PAD), min(len(text), m.end() + _PHONE_WINDOW_PAD)
                window = text[lo:hi]
                if window not in read:
                    read[window] = list(super().analyze(window, entities, nlp_artifacts))
                for found in read[window]:
                    r = copy.copy(found)
                    r.recognition_metadata = dict(found.recognition_metadata)
                    r.start += lo
                    r.end += lo
                    results.setdefault((r.start, r.end), r)
            return EntityRecognizer.remove_duplicates(list(results.values()))

    class OnceEachIpRecognizer(IpRecognizer):  # type: ignore[misc]
        """Presidio's IP recognizer, validating each distinct candidate once per text: a run such as
        "1.1.1.1.1..." offers the same few strings hundreds of times, and each validation parses it.

        One instance serves every screening thread, so the per-text memo lives in a thread-local, never
        on the instance (the engine is shared; a memo on `self` is swapped under another thread's call).
        """

        _memo = threading.local()

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list[Any]:
            self._memo.seen = {}
            try:
                return list(super().analyze(text, entities, nlp_artifacts))
            finally:
                self._memo.seen = None

        def invalidate_result(self, pattern_text: str) -> bool:
            seen: dict[str, bool] | None = getattr(self._memo, "seen", None)
            if seen is None:
                return bool(super().invalidate_result(pattern_text))
            if pattern_text not in seen:
                seen[pattern_text] = bool(super().invalidate_result(pattern_text))
            return seen[pattern_text]

    recognizers: list[Any] = [
        OfflineEmailRecognizer(),
        # International numbers (+CC ...) match under any region; regions only add national formats.
        WindowedPhoneRecognizer(supported_regions=_PHONE_REGIONS),
        CreditCardRecognizer(),
        IbanRecognizer(),
        OnceEachIpRecognizer(),
        UsSsnRecognizer(context=_NARROW_CONTEXT["US_SSN"]),
        UsItinRecognizer(context=_NARROW_CONTEXT["US_ITIN"]),
        UsPassportRecognizer(context=_NARROW_CONTEXT["US_PASSPORT"]),
        UsBankRecognizer(context=_NARROW_CONTEXT["US_BANK_NUMBER"]),
        UkNinoRecognizer(),
        NhsRecognizer(),
        RegexRecognizer(
            "STREET_ADDRESS",
            [(_ANGLO, 0.6), (_GERMANIC, 0.6), (_ROMANCE_FR, 0.6), (_ROMANCE_SOUTH, 0.6), (_PO_BOX, 0.6)],
        ),
    ]
    by_entity: dict[str, list[tuple[str, float]]] = {}
    for entity, pattern, score in _LABELLED:
        by_entity.setdefault(entity, []).append((pattern, score))
    recognizers += [RegexRecognizer(entity, patterns) for entity, patterns in by_entity.items()]

    registry = RecognizerRegistry(supported_languages=["en"])
    for rec in recognizers:
        rec.score_thresholds = SCORE_THRESHOLDS
        registry.add_recognizer(rec)
    nlp = NoOpNlpEngine(models=[{"lang_code": "en", "model_name": "memwarden-noop"}])
    return AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp,
        supported_languages=["en"],
        default_score_threshold=SCORE_THRESHOLDS["default"],
        context_aware_enhancer=WindowContext(),
    )


def _digits(text: str) -> int:
    return sum(c.isdigit() for c in text)


_NOT_A_PHONE_BEFORE = re.compile(
    r"(?i)\b(?:order|invoice|ticket|tracking|reference|ref|booking|confirmation|case|serial|model|part|item|sku"
    r"|isbn|flight|room|po|receipt|transaction|shipment|parcel|claim|policy)\b"
    r"(?:\s+(?:number|no\.?|num|#|id|code))?\s*(?:is|:|#|=)?\s*$"
)
"""A digit run labelled as an order, an invoice or a ticket is that, not a phone number."""


def _keep(text: str, entity: str, start: int, end: int) -> bool:
    if entity == "PHONE_NUMBER":
        return not _NOT_A_PHONE_BEFORE.search(text[max(0, start - 32) : start])
    if entity != "IP_ADDRESS":
        return True
    if not _is_global_ip(text[start:end].strip("[]")):
        return False
    return not _VERSION_BEFORE.search(text[max(0, start - 16) : start])


@lru_cache(maxsize=1024)
def _is_global_ip(candidate: str) -> bool:
    """Parsed once per distinct string: a run of one address repeated offers the same string hundreds of times."""
    try:
        return ipaddress.ip_address(candidate).is_global
    except ValueError:
        return False


def find_pii(content: str, *, entities: frozenset[str] | None = None) -> list[PiiFinding]:
    """Every PII entity in `content` (offsets into `content`), overlapping duplicates resolved by presidio."""
    if not content.strip() or not _MAY_HOLD_PII.search(content):
        return []
    wanted = sorted(entities or ENTITY_CATEGORY)
    results = _Engine.get().analyze(text=content, language="en", entities=wanted)
    out = [
        PiiFinding(r.entity_type, ENTITY_CATEGORY[r.entity_type], r.start, r.end, round(float(r.score), 3))
        for r in results
        if r.entity_type in ENTITY_CATEGORY and _keep(content, r.entity_type, r.start, r.end)
    ]
    # A phone number is the catch-all reading of a digit run; a more specific entity on the same span wins.
    specific = [f for f in out if f.category is not PiiType.PHONE]
    out = [
        f
        for f in out
        if f.category is not PiiType.PHONE or not any(o.start < f.end and f.start < o.end for o in specific)
    ]
    return sorted(out, key=lambda f: (f.start, -f.end))


def pii_categories(content: str) -> list[str]:
    """The PII categories present (sorted codes such as 'email', 'street_address'); [] if none."""
    return sorted({f.category.value for f in find_pii(content)})


def redact(text: str, entities: set[str] | frozenset[str] | list[str] | tuple[str, ...]) -> str:
    """Replace PII of the given types with a placeholder like `[EMAIL]`; other text is kept as is.

    `entities` names categories (`PiiType` values such as "email") or presidio entity names
    ("EMAIL_ADDRESS"); both may be mixed. Overlapping spans are merged so nothing leaks at the edges.
    Invisible characters are removed first: `screen` sees through them, so redaction must too.
    """
    text = strip_invisible(text)
    wanted = {e.lower() for e in entities} | {e.upper() for e in entities}
    spans = sorted(
        (f.start, f.end, f.category) for f in find_pii(text) if f.category.value in wanted or f.entity in wanted
    )
    merged: list[tuple[int, int, PiiType]] = []
    for start, end, category in spans:
        if merged and start <= merged[-1][1]:
            prev = merged[-1]
            merged[-1] = (prev[0], max(prev[1], end), prev[2])
        else:
            merged.append((start, end, category))
    out, pos = [], 0
    for start, end, category in merged:
        out.append(text[pos:start])
        out.append(f"[{category.value.upper()}]")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def warm_up() -> None:
    """Import presidio, build the analyzer and touch every recognizer once."""
    find_pii("warm up: a@b.com +1 415 555 0100 4111 1111 1111 1111 81.2.69.142 12 Elm Road")

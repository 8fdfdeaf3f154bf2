"""Cheap lexical flags the gate needs: directions to the agent (durable or task-scoped) and failed tool output.

Directions (`directions`): does the person tell the agent what to do, and for how long? The gate stages
only what durably changes the agent, so three readings are kept apart:
- a durable direction, an imperative or request aimed at the agent ("from now on reply in French",
  "call me Sam", "don't ever book Ryanair", "I want you to always ask first", "no meetings before
  10am"): PENDING, the person confirms it;
- task-scoped guidance, the same with a scope that ends ("for this ticket, keep the reply very short",
  "just this once", "today"): a `task` memory that expires with its task, not a staged preference;
- the person's own habits and facts ("I never drink coffee after 6pm", "I always take the train on
  Mondays", "I no longer eat meat"): facts about them, not directions to anyone.
A clause is read on its own: leading fillers, persistence and scope phrases and a leading condition
("whenever I travel, ...") are set aside, and what remains is a direction when it starts with an
agent-action verb (in base form, not followed by a verb that makes it a noun phrase: "Order #4412
shipped", "Book club is on Tuesday") or is a request ("I want you to", "you should", "make sure",
"remember to", "can you always ..."). A transcript line ("Caroline: take care!") reports what one
person told another, so its imperatives are not directions to the agent. Mentions of an address stay
behaviour-changing (a new delivery address changes what the agent does).

failed_tool_output rejects a write, so it favours precision. Unmistakable shapes decide alone
(tracebacks, stack frames, `XError:` at the start of a line, "command not found", `npm ERR!`, HTTP
status lines, JSON error bodies, errno names). Phrases that also occur when people *talk about*
errors ("timed out", "HTTP 500", "rate limit exceeded") count fully only in tool/app/system output or
in a short text that leads with them, and never after "how to", "fixed", "about" and the like.

Every pattern is anchored or bounded, and each clause is looked at once: linear in the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import regex as re

from memwarden.detect._prefilter import Prefilter, any_of, pattern_literals
from memwarden.detect._text import normalise
from memwarden.records import SourceKind

_CLAUSES = re.compile(r"[^.!?;\n]+[.!?;]*")
_FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|also|and|so|btw|oh|hey|hi|plus|but|then|one more thing|note|fyi|reminder|important|p\.?s\.?"
    r"|please note)\b[,:!-]?\s+){1,3}",
    re.IGNORECASE,
)
_PERSIST = re.compile(
    r"\b(?:from now on|going forward|from (?:this point|today|here) on(?:wards)?|from today|henceforth"
    r"|in (?:the )?future|by default|as a rule|always|never|every (?:single )?time|each time|any ?time|whenever"
    r"|no longer|not anymore"
    r"|(?:every|each) (?:day|morning|evening|week|month|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|on (?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends|weekdays))\b(?!-)",
    re.IGNORECASE,
)
_DURABLE_MARK = re.compile(
    r"\b(?:from now on|going forward|from (?:this point|today|here) on(?:wards)?|henceforth|in (?:the )?future"
    r"|by default|as a rule|for (?:all|every) (?:future )?\w+)\b",
    re.IGNORECASE,
)
_SCOPE_NOUNS = (
    r"(?:ticket|task|request|reply|response|answer|e-?mail|message|draft|thread|chat|conversation|session|call|meeting"
    r"|document|doc|report|order|booking|trip|issue|case|one|job|query|question|letter|post|presentation|deck|itinerary"
    r"|reservation|flight|week|weekend)"
)
_SCOPE = re.compile(
    rf"\b(?:(?:just |only )?for (?:this|the current|this current|the rest of (?:this|the)) {_SCOPE_NOUNS}"
    rf"|(?:just |only )?(?:in|on) this {_SCOPE_NOUNS}|for now|just this once|(?:just )?this time|today|tonight"
    rf"|this (?:morning|afternoon|evening)|for the moment|until (?:this|the) {_SCOPE_NOUNS} is (?:closed|done|resolved"
    rf"|over|finished)|while (?:we|you) (?:work on|handle|are (?:working on|handling)) (?:this|the) {_SCOPE_NOUNS}"
    rf"|tomorrow|(?:on|by|next|this) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b",
    re.IGNORECASE,
)
_LEAD = re.compile(
    rf"^(?:(?:from now on|going forward|from (?:this point|today|here) on(?:wards)?|from today|henceforth"
    rf"|in (?:the )?future|by default|as a rule|for now|just this once|(?:just )?this time|today|tonight|for the moment"
    rf"|(?:just |only )?for (?:this|the current|the rest of (?:this|the)) {_SCOPE_NOUNS}"
    rf"|(?:just |only )?(?:in|on) this {_SCOPE_NOUNS}"
    rf"|(?:when(?:ever)?|if|every (?:single )?time|each time|any ?time|once|after|before|while|unless)"
    rf" [^,]{{1,80}})\s*,?\s+){{1,3}}",
    re.IGNORECASE,
)
_ADVERBS = re.compile(r"^(?:(?:please|pls|kindly|always|never|also|just|only|ever|now|simply|then)\b,?\s+){1,3}", re.I)
_VERB = (
    r"(?:reply|respond|answer|write|use|call|phone|ring|text|e-?mail|message|book|reserve|send|forward|cc|bcc|copy"
    r"|remind|tell|inform|notify|alert|keep|stop|start|avoid|include|exclude|add|schedule|format|sign|address|ask"
    r"|approve|reject|decline|accept|treat|store|save|log|skip|refer|speak|talk|show|list|summari[sz]e|translate"
    r"|give|put|mark|set|default|choose|pick|order|buy|pay|share|suggest|recommend|mention|double-check|check|confirm"
    r"|leave|round|convert|spell|label|file|archive|delete|prioriti[sz]e|flag|block|mute|wake|sort|greet|end|open"
    r"|close|offer|play|display|return|cancel|prepare|draft|plan|assume|make|put|wait|wire|transfer|respect|double"
    r"|handle|route|escalate|print|attach|bring up|look up|go with|stick to|opt for|sign off|refrain from|quit)"
)
_NEGATION = r"(?:(?:do not|don't|dont|never|please don't|please do not)\s+(?:ever\s+)?)"
_IMPERATIVE = re.compile(
    rf"^{_NEGATION}?{_VERB}\b(?!-|\s*[:#\d]|\s+(?:\S+\s+){{0,2}}?(?:is|was|are|were|has|had|have|will|would|opens?"
    rf"|closes?|starts?|ends?|shows?|shipped|arrived|dropped|rose|fell|increased|decreased|went|came|got|needs|requires"
    rf"|includes|contains|of|club|center|centre|volume|rate|history|status|log|queue|list)\b|\s+(?:it|this) out\b)",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"\b(?:i(?:'d| would)? (?:want|like|need|prefer|expect)|i'd prefer|we(?:'d| would)? (?:want|like|need|prefer))"
    r" (?:you|the assistant|the agent|the bot|it) to\b"
    r"|\b(?:you|the assistant|the agent|the bot|the ai)\s+(?:should|must|need to|have to|will|shall|are to|ought to"
    r"|are going to)\s+(?:always\s+|never\s+|also\s+|now\s+)?(?!be\b|have\b|get\b|find\b|see\b|like\b|love\b)\w+"
    r"|\bmake sure (?:you|to|that you)\b|\b(?:remember|don't forget|do not forget) to\b"
    r"|\b(?:replies|responses|answers|messages|e-?mails|summaries|drafts|reports|notifications|updates|invitations"
    r"|reminders)(?: to me| for me)? (?:should|must|need to|have to) (?:always |never )?(?:be|include|use|go|start|end"
    r"|come|stay|have)\b"
    r"|^no (?:calls|meetings|e-?mails|messages|texts|notifications|bookings|emojis|jargon|spam|flights|reminders)\b"
    r"|\b(?:address|call|refer to) me as\b",
    re.IGNORECASE,
)
_WANTS = re.compile(
    r"\b(?:the )?(?:user|customer|client|he|she|they)\s+(?:wants|would like|asked|has asked|requests|requested|prefers"
    r"|expects|needs)\b",
    re.IGNORECASE,
)
"""A request reported in the third person ("the user wants replies in French from now on"), as an agent writes it."""
_ASK = re.compile(r"^(?:can|could|would|will) you (?:please )?", re.IGNORECASE)
_SPEAKER = re.compile(r"^\s*([A-Z][\w'.-]{1,30}(?: [A-Z][\w'.-]{1,30})?)\s*:\s+\S")
_ROLE_WORDS = frozenset(
    "note reminder tip important update rule policy todo task system assistant developer ai bot model agent user "
    "human instruction instructions ps fyi warning notice memo directive prompt re subject".split()
)
_LABEL = re.compile(r"^\s*[\w' -]{1,40}:\s+")
_ADDRESSES_AGENT = re.compile(r"\b(?:assistant|AI|bot|agent|model|chat ?gpt|claude)\b", re.IGNORECASE)
_ADDRESS = re.compile(
    r"\b(?:my|our|his|her|their|the|new|shipping|delivery|billing|home|mailing|work|postal|e-?mail|office) address\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Directions:
    """What a text directs the agent to do, as flags (no text)."""

    directive: bool = False
    """Some clause is a direction to the agent (durable or not)."""
    durable: bool = False
    """Some direction outlasts the task: the person should confirm it (behaviour-changing)."""
    task_scoped: bool = False
    """Every direction is scoped to the task at hand ("for this ticket", "just this once", "today")."""


def _clause_direction(clause: str, *, reported: bool) -> tuple[bool, bool]:
    """(is a direction, is scoped to a task) for one clause; a leading label ("note:", "new rule:") is read past."""
    direction, scoped = _one_clause(clause, reported=reported)
    label = _LABEL.match(clause)
    if not direction and label and not reported:
        return _one_clause(clause[label.end() :], reported=reported)
    return direction, scoped


def _one_clause(clause: str, *, reported: bool) -> tuple[bool, bool]:
    text = _FILLER.sub("", clause.strip())
    scoped = _SCOPE.search(text) is not None and _DURABLE_MARK.search(text) is None
    question = text.rstrip().endswith("?")
    if reported and not _ADDRESSES_AGENT.search(text):
        return False, scoped
    if _REQUEST.search(text) or (_WANTS.search(text) and _DURABLE_MARK.search(text)):
        return True, scoped
    rest = _ADVERBS.sub("", _LEAD.sub("", text))
    asked = _ASK.match(rest)
    if asked:
        if not (_PERSIST.search(text) or scoped):
            return False, scoped  # "can you recommend a restaurant?": a one-off question, not a rule
        rest = _ADVERBS.sub("", rest[asked.end() :])
    elif question:
        return False, scoped
    return _IMPERATIVE.match(rest) is not None, scoped


@lru_cache(maxsize=1)
def _direction_words() -> Prefilter:
    """What a clause needs to be read as a direction: a word of `_REQUEST`, of `_WANTS` or of `_IMPERATIVE`
    (each is searched in the clause or a part of it). A text holding none of them gives no directions."""
    return Prefilter([any_of(pattern_literals(p) for p in (_REQUEST, _WANTS, _IMPERATIVE))])


def directions(content: str) -> Directions:
    """Which directions to the agent `content` gives, and whether they outlast the task at hand."""
    view = normalise(content)
    if not _direction_words().possible(view)[0]:
        return Directions()
    return _read_directions(view)


def _read_directions(view: str) -> Directions:
    """`directions` of a normalised view, every clause read (no prefilter)."""
    speaker = _SPEAKER.match(view)
    reported = speaker is not None and speaker.group(1).split()[0].lower() not in _ROLE_WORDS
    if speaker is not None and not reported:
        view = view[speaker.end() - 1 :]  # "Note: always reply in French" is still a direction
    found = durable = False
    scoped_all = True
    for m in _CLAUSES.finditer(view):
        is_direction, scoped = _clause_direction(m.group(0), reported=reported)
        if not is_direction:
            continue
        found = True
        if scoped:
            continue
        durable = True
        scoped_all = False
        break  # one durable direction decides all three flags: the clauses after it cannot change them
    return Directions(directive=found, durable=durable, task_scoped=found and scoped_all)


def is_behaviour_changing(content: str) -> bool:
    """True if the statement durably changes how the agent behaves (a direction that outlasts the task at
    hand), or names an address."""
    return directions(content).durable or names_an_address(content)


def names_an_address(content: str) -> bool:
    """True if the statement names an address: behaviour-changing whatever its directions say."""
    return _ADDRESS.search(normalise(content)) is not None


_FAIL_STRONG = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^\s*File \"[^\"\n]+\", line \d+"
    r"|^\s*at [\w$.<>/]+\([^)\n]*(?:\.java|\.kt|\.scala|\.cs|Native Method|Unknown Source)[^)\n]*\)"
    r"|^\s*at (?:[\w$.<>]+ )?\(?[^\s()]+:\d+:\d+\)?\s*$"
    r"|Exception in thread \""
    r"|^\s*(?:[\w]+\.)*[A-Z]\w*(?:Error|Exception|Fault)(?::\s|\s*$)"
    r"|\bcommand not found\b|: not found\s*$"
    r"|\bSegmentation fault\b|\bcore dumped\b"
    r"|\bnpm ERR!|^\s*(?:error(?:\[E\d+\])?|fatal|FATAL|ERROR|CRITICAL|panic):\s"
    r"|^\s*HTTP/\d(?:\.\d)?\s+[45]\d\d\b"
    r"|\"(?:error|errors|errorCode|error_code|errorMessage|error_message|fault)\"\s*:\s*[{\[\"]"
    r"|\"status\"\s*:\s*\"?(?:error|failed|failure|fail)\"?"
    r"|\breturned non-zero exit status\b|\bexited with (?:code|status) [1-9]\d*\b"
    r"|\b(?:ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EACCES|ENOENT|EPIPE|EHOSTUNREACH)\b"
    r"|\bCERTIFICATE_VERIFY_FAILED\b|\bOOMKilled\b"
    r"|(?:^|:\s)No such file or directory\b|(?:^|:\s)Permission denied\b",
    re.MULTILINE,
)
_FAIL_WEAK = re.compile(
    r"\bHTTP\s*(?:error\s*)?[45]\d\d\b|\bstatus(?: code)?\s*[:=]?\s*[45]\d\d\b"
    r"|\b[45]\d\d\s+(?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Time-?out|Not Found|Unauthorized"
    r"|Forbidden|Too Many Requests|Bad Request|Conflict|Unprocessable Entity|Request Timeout)\b"
    r"|\binternal server error\b|\bservice unavailable\b|\bbad gateway\b"
    r"|\brate[- ]limit(?:ed| exceeded| reached| hit)\b|\bquota exceeded\b|\btoo many requests\b"
    r"|\btimed out\b|\btime-?out (?:error|exceeded|expired|occurred)\b|\bdeadline exceeded\b|\bRead ?Timeout\b"
    r"|\bConnect(?:ion)? ?Timeout\b|\bconnection (?:refused|reset|timed out|aborted|closed unexpectedly|failed)\b"
    r"|\bcould not resolve host\b|\bname or service not known\b|\btemporary failure in name resolution\b"
    r"|\bexit (?:code|status) [1-9]\d*\b|\bout of memory\b|\bpermission denied\b|\baccess denied\b"
    r"|\b(?:failed|unable) to (?:connect|fetch|load|parse|open|read|write|execute|resolve|authenticate|complete"
    r"|retrieve|download|upload|send|start)\b|\brequest failed\b|\boperation failed\b|\bno such file\b"
    r"|\bnot found\b(?=[.:]?\s*$)",
    re.IGNORECASE | re.MULTILINE,
)
_TOPICAL = re.compile(
    r"\b(?:how (?:to|do|can|should)|about|handle|handling|handles|fix|fixed|fixes|fixing|debug|debugging|learn|learning"
    r"|explain|explains|avoid|avoiding|prevent|preventing|troubleshoot|troubleshooting|resolve[sd]?|solved|causes?|means"
    r"|what (?:is|does)|prefers?|wants?|likes?|set|sets|increase[sd]?|raise[sd]?)\b[^.\n]{0,40}$",
    re.IGNORECASE,
)
_TOOLISH = frozenset({SourceKind.TOOL, SourceKind.APP, SourceKind.SYSTEM})


@lru_cache(maxsize=1)
def _failure_words() -> Prefilter:
    return Prefilter([pattern_literals(_FAIL_STRONG), pattern_literals(_FAIL_WEAK)])


def is_failed_tool_output(content: str, *, source_kind: SourceKind | str = SourceKind.TOOL) -> bool:
    """True if `content` is (or quotes) the output of a failed tool call: never worth remembering."""
    view = normalise(content)
    strong, weak = _failure_words().possible(view)
    if strong and _FAIL_STRONG.search(view):
        return True
    if not weak:
        return False
    toolish = SourceKind(source_kind) in _TOOLISH
    weight = 0.0
    for m in _FAIL_WEAK.finditer(view):
        line_start = view.rfind("\n", 0, m.start()) + 1
        if _TOPICAL.search(view[max(line_start, m.start() - 60) : m.start()]):
            continue
        leading = m.start() - line_start <= 40
        weight += 1.0 if toolish or (leading and len(view) <= 240) else 0.5
        if weight >= 1.0:
            return True
    return False


def warm_up() -> None:
    """Read the words the prefilters need now, not on the first candidate."""
    _direction_words()
    _failure_words()

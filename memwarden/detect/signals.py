"""Two cheap lexical flags the gate needs: behaviour-changing statements and failed tool output.

behaviour_changing sends a write to PENDING (confirmation), never to rejection, so it favours recall:
"always", "never", "from now on", "don't ever", "every time", "whenever", "no longer", "by default"
and mentions of an address. Past experience ("the parcel never arrived", "I have never been to
Japan") and compounds ("always-on VPN") are not behaviour.

failed_tool_output rejects a write, so it favours precision. Unmistakable shapes decide alone
(tracebacks, stack frames, `XError:` at the start of a line, "command not found", `npm ERR!`, HTTP
status lines, JSON error bodies, errno names). Phrases that also occur when people *talk about*
errors ("timed out", "HTTP 500", "rate limit exceeded") count fully only in tool/app/system output or
in a short text that leads with them, and never after "how to", "fixed", "about" and the like.
"""

from __future__ import annotations

import re

from memwarden.detect._text import normalise
from memwarden.records import SourceKind

_BEHAVIOUR = re.compile(
    r"\b(?:always|never)\b(?![-‑])"
    r"|\bfrom now on\b|\bgoing forward\b|\bfrom (?:this point|today|here) on\b|\bhenceforth\b|\bin (?:the )?future\b"
    r"|\bdon'?t ever\b|\bdo not ever\b|\bevery (?:single )?time\b|\beach time\b|\bwhenever\b|\bany ?time (?:I|you|we)\b"
    r"|\bno longer\b|\bstop (?:doing|using|sending|calling|suggesting|recommending|booking|adding|including)\b"
    r"|\bby default\b|\bremember to\b|\bmake sure (?:to|you)\b|\bnot anymore\b|\bany more\b"
    r"|\b(?:my|our|his|her|their|the|new|shipping|delivery|billing|home|mailing|work|postal|e-?mail|office) address\b",
    re.IGNORECASE,
)
_NOT_BEHAVIOUR = re.compile(
    r"\b(?:have|has|had|'ve|was|were|is|are)\s+(?:always|never)\b"
    r"|\bnever\s+(?:arrived|received|got|came|happened|showed|responded|replied|heard|saw|been|went|made|did|knew|met"
    r"|worked|answered|called back|paid|shipped|turned up)\b"
    r"|\bas always\b|\balmost always\b|\bnever mind\b|\bnevertheless\b",
    re.IGNORECASE,
)

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


def is_behaviour_changing(content: str) -> bool:
    """True if the statement would change how the agent behaves from now on (or names an address)."""
    view = normalise(content)
    masked = _NOT_BEHAVIOUR.sub(" ", view)
    return _BEHAVIOUR.search(masked) is not None


def is_failed_tool_output(content: str, *, source_kind: SourceKind | str = SourceKind.TOOL) -> bool:
    """True if `content` is (or quotes) the output of a failed tool call: never worth remembering."""
    view = normalise(content)
    if _FAIL_STRONG.search(view):
        return True
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

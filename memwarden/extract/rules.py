"""The rule-based extractor: what a careful note-taker would write down from a conversation, offline.

Why rules: the service must extract without a model or a network, deterministically (a retried activity
proposes the same candidates). The rules read the person's own turns clause by clause and file each
clause that says something lasting about them:

- task-scoped guidance ("for this ticket, keep the reply very short") -> a `task` memory for that task
  only, never a durable preference;
- corrections ("actually, I moved to Pune") -> the corrected statement, in the slot it corrects, so the
  gate supersedes the old value;
- standing directions ("from now on, answer in French") and first-person preferences -> `preference`;
- plans and deadlines ("my thesis is due on March 3rd") -> a `task` memory that expires after its date;
- stated facts about the person (where they live, work, who their family are) -> `fact`, in a slot when
  the attribute holds one value;
- dated first-person events ("I ran my first half marathon last weekend") -> `episodic`.

Questions, hypotheticals, requests for this turn ("write me a haiku") and small talk yield nothing.
The assistant's turns and tool output are not the person's statements: only completed actions they
report are proposed, as `model` or `tool` observations, which the gate stages or flags as untrusted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from memwarden.extract import dates
from memwarden.extract.base import Kind, Lifetime, Message, Proposal
from memwarden.records import MemoryType, MessageRole, SourceKind, WriteReason

NAME = "rules-v1"
DEADLINE_GRACE_SECONDS = 86400
"""A plan is kept a day past its date: the person may still refer to it."""

_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
_CLAUSES = re.compile(r"(?:,\s*|\s+)(?:and|but|so|also)\s+(?=(?:I|I'm|I've|I'll|my|My)\b)")
_WORD = re.compile(r"[A-Za-z']+")


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


# --- what yields nothing --------------------------------------------------------------------------
_HYPOTHETICAL = _rx(
    r"^(?:if|what if|suppose|supposing|imagine|assuming|would|could|should|can|do|does|did|is|are|was|were|"
    r"have|has|will|why|how|what|when|where|who|which|whether)\b"
)
_REPORTED = _rx(r"\b(?:said|says|told me|thinks?|thought|claims?|asked me)\b(?! (?:me|I) (?:that )?I\b)")
_REQUEST = _rx(
    r"^(?:please\s+)?(?:write|draft|tell|show|give|find|list|explain|summari[sz]e|translate|generate|create|"
    r"make|help|book|schedule|remind|send|check|look up|search|compare|recommend|suggest|fix|debug|rewrite|"
    r"convert|calculate|plan|can you|could you|would you|let's|lets)\b"
)
_NOT_ABOUT_ME = _rx(
    r"^(?:thanks|thank you|ok|okay|cool|great|nice|sure|yes|no|yeah|yep|nope|hmm|lol|haha|hi|hello|hey)\b"
)

# --- task-scoped guidance -------------------------------------------------------------------------
_TASK_OBJECTS = (
    r"ticket|task|email|e-mail|reply|response|answer|request|conversation|chat|one|project|draft|document|doc|"
    r"pr|pull request|issue|thread|message|report|meeting|presentation|session|call|case|order|post|summary|"
    r"letter|essay|assignment|proposal|slide deck|deck|review|translation|query|bug|story|cover letter|note|"
    r"invoice|newsletter|announcement|script|itinerary|trip|recipe|page|article|blog post|tweet|memo|question"
)
TASK_SCOPE_PHRASE = _rx(
    rf"\b(?:for|in|on|with)\s+(?:this|the current|today's|this particular|this specific|just this)\s+"
    rf"(?:\w+\s+)?(?:{_TASK_OBJECTS})\b|\bjust (?:this|for) (?:once|time|one|today)\b|\bthis time\b|"
    r"\bfor now\b|\bfor today\b|\bfor the rest of (?:this|the) (?:chat|conversation|session)\b|"
    r"\bonly (?:for|in) this\b"
)
_DIRECTIVE = _rx(
    r"\b(?:keep|make|use|write|reply|respond|answer|be|avoid|don't|do not|skip|include|add|focus|stick|format|"
    r"cc|mention|sign|address|leave|put|give|limit|stay|go|aim|please|should|needs? to|must|want|prefer|"
    r"no|without|only)\b"
)

# --- corrections ----------------------------------------------------------------------------------
_CORRECTION = _rx(
    r"^(?:actually|correction|sorry|oops|no wait|wait|scratch that|update|to correct myself|let me correct that|"
    r"i misspoke|my mistake|small correction|quick correction)\b[\s,:;.!-]*(?:i meant[\s,:]*|it's\s+)?"
)
_CORRECTION_INNER = _rx(r"^(?:i meant|i mean)\b[\s,:]*")
_SINCE = _rx(r"\b(?:not .* any ?more|no longer|since (?:moved|switched|changed)|these days|nowadays)\b")

# --- standing directions (durable preferences about how to be served) -----------------------------
_STANDING = _rx(
    r"\b(?:from now on|going forward|in (?:the )?future|from here on|every time|whenever you|each time|always|"
    r"never|by default|as a rule)\b"
)
_ADDRESSED = _rx(
    r"\b(?:you|your|reply|replies|respond|responses|answer|answers|call me|address me|write|message|messages|"
    r"email|emails|send|use|format|remind|notify|summar|explain|show|give|schedule|book|suggest|recommend|ask|"
    r"tell|contact|text|ping|cc|sign|translate|talk|speak|bother|disturb|wake|interrupt)\w*\b"
)

# --- preferences ----------------------------------------------------------------------------------
_FAVOURITE = _rx(r"\bmy (?:all[- ]time |absolute )?favou?rite ([a-z]+(?: [a-z]+)?) (?:is|are|has to be|would be)\b")
_LIKE = _rx(
    r"\bI(?:'m| am)?\s+(?:really |absolutely |just |kind of |kinda |genuinely |totally |do |also |still |"
    r"honestly |truly |much |simply |definitely )*"
    r"(?:loved?|liked?|enjoy(?:ed)?|prefer(?:red)?|adored?|hated?|dislike[ds]?|detest(?:ed)?|loathe[ds]?|"
    r"despise[ds]?|fancy|am into|am obsessed with)\b(?! to (?:know|ask|see if|check|get|have|order|book|"
    r"schedule))"
)
_DISLIKE = _rx(
    r"\bI (?:can't|cannot|can not|couldn't) stand\b|\bI(?:'m| am) (?:not )?(?:a (?:big |huge |massive )?fan of|"
    r"(?:really |big(?:ly)? )?into|keen on|crazy about|obsessed with|partial to|allergic to the idea)\b|"
    r"\bI (?:don't|do not|never) (?:really |much )?(?:like|enjoy|eat|drink|care for|do|watch|use|wear)\b|"
    r"\bI(?:'d| would) (?:much )?rather\b|\bnot a fan of\b|\bI(?:'m| am) more of an? \w+ person\b|"
    r"\bI(?:'m| am) an? \w+ person\b"
)
_HABIT = _rx(
    r"\bI (?:usually|always|never|normally|typically|generally|mostly|often|tend to|only|rarely|regularly)\s+"
    r"(?:\w+ )?(?:prefer|drink|eat|take|go|use|read|watch|listen|wear|travel|fly|sit|order|cook|work out|run|"
    r"shop|sleep|wake|get up|start|book|pay|drive|ride|walk|bike|cycle|play|code|write|study|avoid|skip|choose|pick)\b"
)
_DIET = _rx(
    r"\bI(?:'m| am| have been|'ve been)\s+(?:a |strictly |mostly |fully |now )?(vegetarian|vegan|pescatarian|"
    r"keto|paleo|teetotal|sober|kosher|halal|gluten[- ]free|dairy[- ]free|plant[- ]based)\b|"
    r"\bI (?:don't|do not|never) eat (?:meat|pork|beef|fish|dairy|gluten|eggs)\b"
)

# --- plans and deadlines --------------------------------------------------------------------------
_PLAN_STRONG = _rx(
    r"\bI(?:'m| am)\s+(?:going to|planning to|planning on|gonna|hoping to|thinking of|thinking about|about to|"
    r"aiming to|due to|scheduled to|supposed to|set to)\b|\bI (?:plan|intend|hope|aim|want|need|have|expect)"
    r" to\b|\bI(?:'ve| have) (?:got )?to\b|\bwe(?:'re| are) (?:going to|planning to|getting)\b|"
    r"\bmy plan is\b"
)
_PLAN_DATED = _rx(
    r"\bI(?:'ll| will| shall)\b|\bI(?:'m| am) (?:flying|travel+ing|leaving|heading|visiting|moving|starting|"
    r"getting|having|meeting|presenting|interviewing|attending|taking|seeing|going|running|hosting|driving|"
    r"off to|back)\b|\b(?:is|are|was) due\b|\bdeadline\b|\bI have an? (?:\w+ )?(?:meeting|appointment|"
    r"interview|exam|test|flight|call|presentation|deadline|surgery|checkup|check-up|review|date|recital|"
    r"wedding|conference|trip|game|match|race|class|demo|launch)\b|\bmy (?:\w+ )?(?:flight|train|appointment|"
    r"interview|exam|meeting|presentation|wedding|trip|surgery|deadline|birthday party|race|launch|"
    r"vacation|holiday) (?:is|leaves|departs|starts|was moved|got moved|got rescheduled)\b|"
    r"\b(?:the|my|our) (?:\w+ )?\w+ (?:got|was|has been|is being|is) (?:moved|rescheduled|postponed|pushed|"
    r"brought forward|"
    r"delayed) (?:to|until|till)\b"
)
_UNDATED_PLAN_OK = _rx(r"\b(?:planning|plan|intend|hoping|hope|aiming|aim|thinking of|thinking about|going to)\b")
_NOW_ONLY = _rx(r"\b(?:right now|now|in a (?:sec|second|minute|moment|bit)|later today|shortly|real quick)\b")

# --- facts about the person -----------------------------------------------------------------------
_OCCUPATIONS = (
    r"engineer|developer|programmer|teacher|nurse|doctor|physician|designer|manager|student|lawyer|attorney|"
    r"writer|author|journalist|accountant|architect|chef|cook|pilot|pharmacist|dentist|scientist|researcher|"
    r"professor|lecturer|consultant|analyst|artist|musician|photographer|electrician|plumber|carpenter|"
    r"mechanic|firefighter|police officer|officer|paramedic|therapist|psychologist|veterinarian|vet|librarian|"
    r"barista|waiter|waitress|bartender|driver|farmer|entrepreneur|founder|freelancer|contractor|intern|"
    r"editor|translator|surgeon|midwife|caregiver|retiree|economist|statistician|actuary|administrator|"
    r"technician|salesperson|recruiter|marketer|coach|trainer|tutor|paralegal|banker|broker|realtor|clerk|"
    r"cashier|baker|butcher|tailor|florist|welder|machinist|dancer|actor|actress|singer|producer|director|"
    r"sysadmin|devops|data scientist|product owner|pm|cto|ceo|cfo|vp|grad student|phd student|postdoc"
)
_FACT_RULES: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (_rx(r"\bmy name is\b|\bmy name's\b"), "name"),
    (_rx(r"\b(?:call me|I go by|people call me|everyone calls me)\b"), "name.preferred"),
    (
        _rx(
            r"\bI (?:just |recently |finally |now )?(?:live|am living|reside|stay)\b(?! (?:with|alone|by|for|"
            r"on my own|off))|"
            r"\bI(?:'m| am) (?:now |currently )?(?:living|based|located|staying|settled) (?:in|out of|near)\b|"
            r"\bI(?:'ve| have)? (?:just |recently |finally |since )?(?:moved|relocated) (?:to|back to)\b|"
            r"\bmy (?:home|house|flat|apartment) is in\b|\bI(?:'m| am) (?:now )?in [A-Z][a-z]+ now\b"
        ),
        "location",
    ),
    (
        _rx(
            r"\bI(?:'m| am) (?:originally )?from\b(?! (?:the|a|my|work|home|school))|\bI was born in\b|"
            r"\bI grew up in\b|\bI(?:'m| am) a native of\b"
        ),
        "origin",
    ),
    (
        _rx(
            r"\bI (?:now |currently |still |no longer |don't |do not )?work (?:at|for)\b|"
            r"\bI (?:just |recently )?(?:started|got|landed|accepted) (?:a |the )?(?:new )?(?:job|role|"
            r"position) (?:at|with)\b|\bI(?:'m| am) (?:now |currently )?(?:employed|working) "
            r"(?:at|for|with)\b|\bI (?:just )?(?:joined|started (?:at|working at|working for)|got (?:a|"
            r"the) job (?:at|with))\b|"
            r"\bmy (?:employer|company) is\b|\bI(?:'ve| have) (?:worked|been working) (?:at|for)\b"
        ),
        "job.employer",
    ),
    (
        _rx(
            rf"\bI (?:now |currently )?work as\b|\bI(?:'m| am) (?:now |currently )?(?:an? |the )(?:\w+ |"
            rf"\w+-\w+ )?(?:{_OCCUPATIONS})s?\b|"
            r"\bmy (?:job|role|title|position) is\b|\bI(?:'m| am) working as\b|\bI got promoted to\b"
        ),
        "job.title",
    ),
    (
        _rx(
            r"\bI(?:'m| am) (\d{1,3})(?: years old| yrs| y/?o)?\b(?!\s*(?:%|percent|minutes|min|km|miles|"
            r"k\b))|\bI (?:just )?turned \d{1,3}\b"
        ),
        "age",
    ),
    (_rx(r"\bmy birthday is\b|\bmy birthday's\b|\bI was born on\b"), "birthday"),
    (
        _rx(
            r"\bI(?:'m| am| got| just got) (?:happily |recently |now )?(?:married|single|divorced|engaged|widowed|"
            r"separated|in a relationship)\b"
        ),
        "relationship.status",
    ),
    (
        _rx(
            r"\bmy (?:wife|husband|partner|spouse|girlfriend|boyfriend|fianc[eé]e?|son|daughter|kid|child|mom|"
            r"mother|mum|dad|father|sister|brother|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|"
            r"dog|cat|pet|puppy|kitten|best friend|boss|manager|roommate|flatmate|landlord|doctor|therapist|"
            r"parents|kids|children|twins|nephew|niece|in-laws|team|teammates?|colleague|coworker|co-worker)"
            r"(?:'s name)? (?:is|are|was|were|lives?|works?|has|have|likes?|loves?|hates?|studies|goes|just|"
            r"turned|called|named)\b"
        ),
        None,
    ),
    (
        _rx(
            r"\bI have (?:a|an|one|two|three|four|five|\d+|no|twin) (?:\w+ )?(?:dogs?|cats?|kids?|children|sons?|"
            r"daughters?|sisters?|brothers?|siblings?|pets?|parrots?|rabbits?|hamsters?|fish|horses?|grandchildren|"
            r"grandkids|car|bike|motorcycle|house|apartment|flat|condo|garden|degree|masters|phd|allergy|"
            r"condition|disability|tattoo|kid|partner|wife|husband|boyfriend|girlfriend|roommates?)\b|"
            r"\bI have an? (?:\w+ ){0,3}(?:named|called) [A-Z]|\bI(?:'m| am) allergic to\b|"
            r"\bI have (?:diabetes|asthma|celiac|coeliac|adhd|dyslexia|migraines|"
            r"a (?:bad|weak|bad) (?:back|knee|heart)|high blood pressure|an? (?:\w+ )?allergy)\b|"
            r"\bI(?:'m| am) (?:lactose|gluten) intolerant\b"
        ),
        None,
    ),
    (
        _rx(
            r"\bI (?:speak|study|studied|majored in|graduated (?:from|in)|did my (?:degree|masters|phd) in|own|"
            r"drive|ride|play|volunteer|coach|teach|support|follow|collect|knit|paint|code in|program in|"
            r"am fluent in|use an?|run an?)\b|\bI(?:'ve| have) been (?:learning|playing|practicing|practising|"
            r"studying|doing)\b|"
            r"\bI(?:'m| am) (?:learning|studying|fluent in|left-handed|right-handed|colou?r ?blind|deaf|"
            r"blind|diabetic|pregnant|retired|unemployed|self-employed)\b|\bI(?:'ve| have) been (?:a|"
            r"an) \w+ for\b|\bI(?:'ve| have) (?:been )?(?:lived|worked|played|"
            r"studied|practiced|practised) .* for (?:\d+|a|an|two|three|many|several) (?:years?|months?|decades?)\b"
        ),
        None,
    ),
)
_GENERIC_MY = _rx(
    r"\bmy (?!question|problem|point|guess|bad|goal here|issue|request|idea|thought|take|concern|apologies|"
    r"pleasure|turn|answer|reply|message|code|output|text|draft|screen|computer|laptop|browser|internet|"
    r"connection|friend's|friends')([a-z]+(?: [a-z]+)?) (?:is|are) (?!(?:\w+ )?(?:due|broken|not working|down|slow|"
    r"loading|wrong|here|there|this|that|it))"
)
_SLOT_OF_MY = {
    "email": "contact.email",
    "phone": "contact.phone",
    "phone number": "contact.phone",
    "address": "contact.address",
    "timezone": "timezone",
    "time zone": "timezone",
    "blood type": "health.blood_type",
    "shoe size": "size.shoe",
    "height": "height",
    "nationality": "nationality",
    "native language": "language.native",
    "first language": "language.native",
    "mother tongue": "language.native",
    "pronouns": "pronouns",
    "hometown": "origin",
    "zodiac sign": "zodiac",
    "star sign": "zodiac",
}
_RELATION_SLOT = _rx(
    r"\bmy (wife|husband|partner|spouse|girlfriend|boyfriend|fianc[eé]e?|son|daughter|mom|mother|mum|dad|"
    r"father|sister|brother|dog|cat|boss|manager|best friend)(?:'s name)? is (?:called |"
    r"named )?([A-Z][a-z]+)\b(?!\s+years)"
)

# --- episodes -------------------------------------------------------------------------------------
_PAST_CUE = _rx(
    r"\b(?:yesterday|last (?:night|week|weekend|month|year|summer|winter|spring|fall|autumn|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|time)|this (?:morning|afternoon|past week|past weekend)|"
    r"earlier (?:today|this week|this month|this year)|recently|just|(?:\w+ )(?:days?|weeks?|months?|years?) ago|"
    r"ago|back in (?:\d{4}|[A-Z][a-z]+)|in (?:19|20)\d\d|over the weekend|on my (?:birthday|vacation|holiday|trip))\b"
)
_PAST_FIRST_PERSON = _rx(
    r"\b(?:I|we|my \w+ and I)\s+(?:finally |just |also |actually |recently )?(?:went|visited|saw|met|had|finished|"
    r"started|got|bought|ran|watched|read|tried|attended|took|made|won|lost|passed|failed|completed|"
    r"celebrated|adopted|hiked|climbed|flew|drove|travel+ed|moved|quit|left|joined|graduated|learned|"
    r"learnt|built|wrote|published|launched|signed|broke|hurt|injured|cooked|baked|painted|planted|sold|"
    r"rented|booked|cancel+ed|received|spent|gave|hosted|organized|organised|switched|upgraded|fixed|"
    r"discovered|found|lost|missed|skipped|did|ate|drank|swam|played|performed|presented|interviewed|"
    r"proposed|married|divorced|retired|volunteered|donated|sprained|broke up|came back|got back|returned)\b|"
    r"\bI(?:'ve| have) (?:just |finally |recently )?(?:finished|started|completed|been to|visited|seen|read|"
    r"watched|booked|bought|adopted|passed|won|run|climbed|moved|quit|joined|signed up|lost)\b"
)

# --- assistant and tool turns ---------------------------------------------------------------------
_ASSISTANT_DONE = _rx(
    r"\bI(?:'ve| have) (?:now |just |successfully |gone ahead and )?(?:booked|scheduled|reserved|ordered|sent|"
    r"created|set up|added|cancel+ed|renewed|paid|moved|updated|filed|submitted|registered|rescheduled|"
    r"set a reminder|saved)\b|\b(?:your|the) (?:\w+ )?(?:booking|reservation|order|appointment|meeting|ticket|"
    r"subscription|payment|refund|request|flight|table) (?:is|has been|was) (?:now )?(?:confirmed|booked|"
    r"scheduled|placed|created|cancel+ed|processed|submitted|approved|moved|rescheduled)\b"
)
_TOOL_DONE = _rx(
    r"\b(?:confirmed|booked|scheduled|created|placed|shipped|delivered|completed|processed|approved|"
    r"reserved|issued|cancel+ed|success(?:ful)?)\b"
)
_TOOL_FAILED = _rx(r"\b(?:error|failed|failure|exception|timeout|timed out|not found|denied|invalid|traceback)\b")

_GUIDANCE_KEYS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "language",
        _rx(
            r"\b(?:in|into) (?:english|french|spanish|german|italian|portuguese|dutch|hindi|japanese|"
            r"chinese|mandarin|korean|arabic|russian|polish|swedish|turkish|plain english)\b"
        ),
    ),
    (
        "format",
        _rx(
            r"\b(?:bullet|bullets|bulleted|table|markdown|list|json|numbered|headings?|paragraphs?|"
            r"plain text|code block|emoji|emojis|bold|csv|outline)\b"
        ),
    ),
    (
        "reply_length",
        _rx(
            r"\b(?:short|shorter|brief|briefer|concise|long|longer|detailed|length|words|"
            r"sentences?|lines?|tl;?dr|succinct|terse|verbose|one-liner|pages?)\b"
        ),
    ),
    (
        "tone",
        _rx(
            r"\b(?:formal|informal|casual|friendly|polite|tone|professional|warm|blunt|direct|gentle|"
            r"playful|serious|humou?r|jokes?|apologetic|enthusiastic|neutral)\b"
        ),
    ),
    ("audience", _rx(r"\b(?:beginner|expert|technical|non-technical|layman|kids?|children|audience|eli5)\b")),
    ("signoff", _rx(r"\b(?:sign|signature|sign-off|signoff|cc|bcc|recipient|address(?:ed)? to)\b")),
)


def guidance_key(text: str) -> str:
    """What a piece of guidance is about: its repeats across sessions are recognised by this key."""
    for key, pattern in _GUIDANCE_KEYS:
        if pattern.search(text):
            return key
    return "general"


def _clean(clause: str) -> str:
    clause = clause.strip().strip("\"'").strip()
    clause = re.sub(
        r"^(?:and|but|so|also|oh|well|um|uh|btw|by the way|fyi|anyway|ah|also,)[\s,]+", "", clause, flags=re.I
    )
    return clause.strip(" ,;:-")


def _sentence(text: str) -> str:
    text = text[0].upper() + text[1:] if text else text
    return text if text.endswith((".", "!", "?")) else text + "."


def clauses(text: str) -> list[str]:
    """Sentences, each split where "and/but/so I ..." starts a new first-person statement."""
    out: list[str] = []
    for sentence in _SENTENCES.split(text):
        sentence = sentence.strip()
        if not sentence:
            continue
        for clause in _CLAUSES.split(sentence):
            cleaned = _clean(clause)
            if cleaned:
                out.append(cleaned)
    return out


def _is_question(clause: str) -> bool:
    return clause.rstrip().endswith("?") or bool(_HYPOTHETICAL.match(clause))


def _ttl(deadline: datetime, ref: datetime) -> int:
    return max(3600, int((deadline - ref).total_seconds()) + DEADLINE_GRACE_SECONDS)


class RuleExtractor:
    """The offline default. Deterministic: the same messages and reference time give the same proposals."""

    name = NAME

    async def extract(self, messages: list[Message], received_at: datetime | None = None) -> list[Proposal]:
        return self.extract_sync(messages, received_at)

    def extract_sync(self, messages: list[Message], received_at: datetime | None = None) -> list[Proposal]:
        received = received_at or datetime.now(UTC)
        out: list[Proposal] = []
        for index, message in enumerate(messages):
            ref = message.timestamp.astimezone(UTC) if message.timestamp is not None else received
            if message.role is MessageRole.USER:
                out.extend(self._person(index, message.content, ref))
            elif message.role is MessageRole.ASSISTANT:
                out.extend(self._reported(index, message.content, SourceKind.MODEL, _ASSISTANT_DONE))
            elif message.role is MessageRole.TOOL:
                if not _TOOL_FAILED.search(message.content):
                    out.extend(self._reported(index, message.content, SourceKind.TOOL, _TOOL_DONE))
        return out

    # The person's own turns ----------------------------------------------------------------------
    def _person(self, index: int, text: str, ref: datetime) -> list[Proposal]:
        out: list[Proposal] = []
        for clause in clauses(text):
            proposal = self.classify(index, clause, ref)
            if proposal is not None:
                out.append(proposal)
        return out

    def classify(self, index: int, clause: str, ref: datetime) -> Proposal | None:
        """One clause of the person's -> at most one proposal (the first rule that files it)."""
        if len(_WORD.findall(clause)) < 3 or (_NOT_ABOUT_ME.match(clause) and len(_WORD.findall(clause)) < 5):
            return None
        correction = _CORRECTION.match(clause)
        if correction and correction.end() > 0 and correction.end() < len(clause):
            inner = _CORRECTION_INNER.sub("", clause[correction.end() :]).strip()
            found = self._statement(index, inner, ref) if inner else None
            if found is not None and found.kind in (Kind.FACT, Kind.PREFERENCE, Kind.PLAN):
                return found.model_copy(update={"kind": Kind.CORRECTION})
            return found
        found = self._statement(index, clause, ref)
        if found is not None and found.kind in (Kind.FACT, Kind.PREFERENCE) and _SINCE.search(clause):
            return found.model_copy(update={"kind": Kind.CORRECTION})
        return found

    def _statement(self, index: int, clause: str, ref: datetime) -> Proposal | None:
        if _is_question(clause) or _REPORTED.search(clause):
            return None
        content = _sentence(clause)

        def make(
            kind: Kind,
            type_: MemoryType,
            lifetime: Lifetime,
            reason: WriteReason,
            slot: str | None = None,
            **extra: object,
        ) -> Proposal:
            return Proposal(
                message_index=index,
                content=content,
                type=type_,
                lifetime=lifetime,
                kind=kind,
                source_kind=SourceKind.USER,
                reason=reason,
                slot=slot,
                **extra,  # type: ignore[arg-type]
            )

        if TASK_SCOPE_PHRASE.search(clause) and _DIRECTIVE.search(clause):
            return make(
                Kind.TASK_GUIDANCE,
                MemoryType.TASK,
                Lifetime.TASK,
                WriteReason.USER_EXPLICIT_PREFERENCE,
                guidance_key=guidance_key(clause),
            )
        if _STANDING.search(clause) and _ADDRESSED.search(clause) and not _PAST_CUE.search(clause):
            key = guidance_key(clause)
            slot = f"pref.{key}" if key != "general" else None
            if re.search(r"\bcall me\b|\baddress me as\b", clause, re.I):
                slot = "name.preferred"
            return make(
                Kind.PREFERENCE, MemoryType.PREFERENCE, Lifetime.DURABLE, WriteReason.USER_EXPLICIT_PREFERENCE, slot
            )
        if _REQUEST.match(clause):
            return None
        deadline = dates.resolve(clause, ref) if dates.DATE_WORDS.search(clause) else None
        if deadline is not None and deadline < ref:
            deadline = None
        if (_PLAN_STRONG.search(clause) or _PLAN_DATED.search(clause)) and not _PAST_FIRST_PERSON.search(
            clause.split(" to ")[0]
        ):
            if deadline is not None and not _NOW_ONLY.search(clause):
                return make(
                    Kind.PLAN,
                    MemoryType.TASK,
                    Lifetime.DEADLINE,
                    WriteReason.USER_STATED_FACT,
                    ttl_seconds=_ttl(deadline, ref),
                )
            if _PLAN_STRONG.search(clause) and _UNDATED_PLAN_OK.search(clause) and not _NOW_ONLY.search(clause):
                fact = self._fact(clause)
                if fact is None or fact[0] != "location":
                    return make(Kind.PLAN, MemoryType.TASK, Lifetime.TASK, WriteReason.USER_STATED_FACT)
        if _DIET.search(clause):
            return make(
                Kind.PREFERENCE, MemoryType.PREFERENCE, Lifetime.DURABLE, WriteReason.USER_EXPLICIT_PREFERENCE, "diet"
            )
        if favourite := _FAVOURITE.search(clause):
            noun = re.sub(r"[^a-z]+", "_", favourite.group(1).lower()).strip("_")
            return make(
                Kind.PREFERENCE,
                MemoryType.PREFERENCE,
                Lifetime.DURABLE,
                WriteReason.USER_EXPLICIT_PREFERENCE,
                f"favorite.{noun}",
            )
        fact = self._fact(clause)
        episode = bool(
            _PAST_FIRST_PERSON.search(clause) and (_PAST_CUE.search(clause) or dates.DATE_WORDS.search(clause))
        )
        if fact is not None and fact[0] == "my" and episode:
            fact = None  # "yesterday I finished the race, my legs are sore": the event, not a standing fact
        if fact is not None and fact[1] == "name.preferred":
            return make(
                Kind.PREFERENCE, MemoryType.PREFERENCE, Lifetime.DURABLE, WriteReason.USER_EXPLICIT_PREFERENCE, fact[1]
            )
        if fact is not None:
            return make(Kind.FACT, MemoryType.FACT, Lifetime.DURABLE, WriteReason.USER_STATED_FACT, fact[1])
        if _LIKE.search(clause) or _DISLIKE.search(clause) or _HABIT.search(clause):
            if not _PAST_CUE.search(clause) or _HABIT.search(clause):
                return make(
                    Kind.PREFERENCE, MemoryType.PREFERENCE, Lifetime.DURABLE, WriteReason.USER_EXPLICIT_PREFERENCE
                )
        if episode:
            return make(Kind.EPISODE, MemoryType.EPISODIC, Lifetime.EPISODE, WriteReason.USER_STATED_FACT)
        return None

    @staticmethod
    def _fact(clause: str) -> tuple[str, str | None] | None:
        """(which rule, its slot) for a stated fact about the person, or None."""
        if relation := _RELATION_SLOT.search(clause):
            rel = relation.group(1).lower().replace("é", "e")
            return "relation", f"family.{rel}.name"
        for pattern, slot in _FACT_RULES:
            if pattern.search(clause):
                return (slot or "fact"), slot
        if generic := _GENERIC_MY.search(clause):
            noun = generic.group(1).lower()
            return "my", _SLOT_OF_MY.get(noun)
        return None

    # Others' turns ------------------------------------------------------------------------------
    @staticmethod
    def _reported(index: int, text: str, source: SourceKind, pattern: re.Pattern[str]) -> list[Proposal]:
        """A completed action the assistant or a tool reports: an episode, never the person's statement."""
        out: list[Proposal] = []
        for clause in clauses(text):
            if _is_question(clause) or not pattern.search(clause):
                continue
            out.append(
                Proposal(
                    message_index=index,
                    content=_sentence(clause),
                    type=MemoryType.EPISODIC,
                    lifetime=Lifetime.EPISODE,
                    kind=Kind.EPISODE,
                    source_kind=source,
                    reason=WriteReason.TASK_OUTCOME
                    if source is SourceKind.MODEL
                    else WriteReason.TOOL_OBSERVATION_UNVERIFIED,
                    confirm_requested=source is SourceKind.MODEL,
                )
            )
            break  # one report per turn: the rest of an assistant's turn is talk
        return out

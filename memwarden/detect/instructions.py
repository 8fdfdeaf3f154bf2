"""Instruction-like text: does this observation try to steer the model that will later read it?

Untrusted content (web pages, e-mails, tool output) ends up in a prompt when memory is retrieved.
Text written *to the model* rather than *about the world* is an indirect prompt injection, and in a
memory service a persistent one. No single regex separates the two ("From now on the cafeteria opens
at 7:30" is an ordinary notice), so this module scores several independent signals and decides on
their sum:

- strong ones decide alone (weight >= 1): "ignore previous instructions" and its family (also in
  German, French, Spanish, Italian, Portuguese), chat-template role markers (`<|im_start|>`, `[INST]`,
  `### Instruction:`), prompt-leak requests, jailbreak personas, tool-call syntax, memory writes
  addressed to the model ("save this to your memory"), exfiltration of the user's data to an
  address, ASCII hidden in Unicode tag characters, encoded instructions;
- weaker ones add up: text addressed to an AI ("Dear AI,", "if you are a language model"),
  directives ("you must", "the assistant should"), persistence ("from now on", "always respond"),
  concealment ("don't tell the user"), claims of the user's or an admin's authority, requests that
  target the user's data, hidden markup (CSS-hidden elements, HTML comments, zero-width characters).

Text inside hidden markup counts 1.5x; a strong phrase inside quotation marks ("phrases like 'ignore
previous instructions' can hijack chatbots") counts 0.4x; "ignore the previous instructions I sent
about parking" (a person correcting themself) counts 0.3x. Matching runs on a normalised view
(NFKC, zero-width removed, look-alike letters folded); strong rules also run on a leetspeak-folded
view, on ASCII smuggled in tag characters and on base64 payloads. Two interactions: an imperative
("cancel ...", "forward ...") after the text has addressed the model adds 0.5; one in text that
speaks of "the user" in the third person (its reader is the user's agent) adds 0.3.

How good is it? See bench/detect_eval.py: precision is high on benign look-alikes, but recall on
phrasings it was not tuned on is low (~0.4 on the untouched `holdout4` split). Treat it as one layer:
retrieved memory is still rendered as labelled data, never as instructions.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from functools import lru_cache

import regex as re

from memwarden.detect._prefilter import Prefilter, required_literals
from memwarden.detect._text import (
    NO_DEADLINE_S,
    Deadline,
    DeadlineExceeded,
    count_invisible,
    has_invisible,
    normalise,
    normalise_spaced,
    smuggled_tags,
    strip_invisible,
)

THRESHOLD = 1.0
"""Sum of signal weights at which text is instruction-like."""

HIDDEN_MULTIPLIER = 1.5
QUOTED_MULTIPLIER = 0.4
SELF_CORRECTION_MULTIPLIER = 0.3

_AI = (
    r"(?:AI|A\.I\.|artificial intelligence|assistant|agent|model|LLM|language model|chat ?bot|bot|GPT|ChatGPT|Claude"
    r"|Gemini|Copilot|Bard|Llama|Mistral|Grok|AI system|AI agent|AI assistant|AI model|LLM agent)s?"
)
_AI_STRICT = (
    r"(?:AI|A\.I\.|LLM|language model|GPT|ChatGPT|Claude|Gemini|Copilot|Bard|AI (?:system|agent|assistant|model)"
    r"|LLM agent)s?"
)

_IGNORE_VERB = (
    r"(?:ignore|disregard|forget|override|bypass|skip|discard|drop|abandon|set aside|put aside"
    r"|pay no (?:attention|heed) to|do not follow|don't follow|stop following|no longer follow|neglect|overlook"
    r"|cancel|delete|erase|clear)"
)
_DET = r"(?:(?:all|any|every|each|the|your|its|these|those|of|my|our)\s+){0,3}"
_QUAL = (
    r"(?:previous|prior|above|earlier|preceding|former|original|initial|existing|old|foregoing|past|current|system"
    r"|safety|given|other|hidden|developer|built-in)"
)
_NOUN = (
    r"(?:instructions?|prompts?|rules?|directions|directives?|guidelines?|guidance|constraints|programming|guardrails"
    r"|polic(?:y|ies)|restrictions|commands|orders|system prompt|context|safeguards|filters|training)"
)
_SENSITIVE = (
    r"(?:conversation|chat(?: history| log)?|history|transcript|messages?|inbox|e-?mails?|memory|memories|context"
    r"|system prompt|prompt|instructions|passwords?|credentials?|api keys?|tokens?|secrets?|cookies?|session"
    r"|contacts?|contact list|(?:home |saved )?address(?:es)?|location|phone numbers?|date of birth|card numbers?"
    r"|payment methods?|medical records|files|documents|notes|calendar|personal (?:data|information|details)"
    r"|private \w+|confidential \w+|summary|everything|all (?:the )?(?:data|files|e-?mails|messages)"
    r"|customer (?:data|table|records|list|database|details)|database|user (?:data|table|records)"
    r"|(?:card|payment|bank|account|billing|personal|login|contact) (?:details|numbers?|info(?:rmation)?|data)"
    r"|mailbox|backup codes|recovery codes|two-factor \w+|2fa \w+|one-time codes?|otp|order history|purchase history"
    r"|search (?:history|queries)|browsing history)"
)
_OWNER = r"(?:the user'?s?|user's|their|the customer'?s|all|every|entire|full|complete|private|saved|recent|latest)"
_DEST = (
    r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|(?:https?|ftp)://\S++|www\.\S++|\bwebhook\b"
    r"|(?:the|this|that|following|above|below) (?:address|e-?mail(?: address)?|url|link|endpoint|server|number|site)"
    r"|\+\d{7,}|(?:in|into) (?:your |the )?(?:next |every |each )?(?:reply|response|answer|output|summary))"
)
_EXFIL_VERB = (
    r"(?:send|forward|e-?mail|mail|post|upload|transmit|exfiltrate|leak|share|copy|submit|paste|append|include|encode"
    r"|attach|cc|bcc|relay|report|sync|export|dump|publish|embed|render|visit|navigate to|open|fetch|load|request|ping"
    r"|envoie|envoyer|sende|schicke|env[ií]a)"
)

_Rule = tuple[str, float, str, int]
"""(signal code, weight, regex, flags). Flags: bit 1 = strong (also run on folded/decoded views),
bit 2 = quotable (downweighted inside quotes), bit 4 = self-correction check."""

STRONG, QUOTABLE, SELFCHECK = 1, 2, 4

# --- what an untrusted source must never get written: claims and rules aimed at the agent ---------------------
_PRINCIPAL = (
    r"(?:the|this|that|our)\s+(?:user|customer|client|requester|account(?: holder| owner)?|sender|caller|member|person"
    r"|vendor|supplier|payee)|user|requests? from (?:this|the) (?:user|customer|account|vendor)|(?:vendor|supplier"
    r"|account|payee|merchant) #?\d+"
)
_ROLE = (
    r"(?:an?\s+|the\s+)?(?:verified\s+|trusted\s+|registered\s+|system\s+|global\s+|company\s+)?(?:admin(?:istrator)?"
    r"|super-?admin|super-?user|sysadmin|root(?: user)?|moderator|owner of (?:this|the) (?:account|workspace|tenant))"
)
_CHECKS = (
    r"(?:verification|approval|approvals|review|reviews|authori[sz]ation|confirmation|confirmations|authentication"
    r"|sign-?off|2fa|two-factor(?: authentication| confirmation)?|identity (?:checks?|verification)|fraud (?:checks?"
    r"|alerts?)|manager (?:checks?|approval|sign-?off|review)|security (?:checks?|questions)|checks?|receipts?"
    r"|a receipt|limits?|spending limits?|questions asked)"
)
_AGENT = r"(?:AI|A\.I\.|LLM|assistant|agent|bot|chat ?bot|model|language model|AI (?:agent|assistant|model|system))s?"

AGENT_RULES: tuple[tuple[str, float, str, int], ...] = (
    # claims of authority or permission about the person (or party) the agent serves
    (
        "authority_claim",
        1.0,
        rf"\b(?:{_PRINCIPAL})\s+(?:is|was|has been|is now|are)\s+(?:now\s+|also\s+|actually\s+)?{_ROLE}\b",
        STRONG,
    ),
    (
        "authority_claim",
        1.0,
        rf"\b(?:{_PRINCIPAL})\s+(?:has|holds|was granted|has been granted|now has)\s+(?:full\s+)?(?:admin"
        rf"(?:istrator)?|root|owner|super-?user|elevated|override|manager)\s+(?:rights|access|privileges|permissions"
        rf"|status|role)\b",
        STRONG,
    ),
    (
        "permission_claim",
        1.0,
        rf"\b(?:{_PRINCIPAL}|(?:this|the) (?:transfer|payment|refund|request|order|invoice)s?)\s+(?:is|are|has been"
        rf"|have been|was|were)\s+(?:now\s+|already\s+|always\s+)?(?:pre-?approved|pre-?authori[sz]ed|whitelisted"
        rf"|allow-?listed|exempt|authori[sz]ed|cleared|permitted|allowed|entitled|trusted|verified|(?:always"
        rf"|automatically|auto-?)\s*approved|approved (?:by default|by policy|automatically))\b(?!\s+by (?:the )?"
        rf"(?:bank|post office|courier)\b)",
        STRONG,
    ),
    (
        "permission_claim",
        1.0,
        r"\b(?:authori[sz]ed|cleared|permitted|allowed|entitled|approved)\s+(?:\w+\s+){0,2}?(?:for|to)\s+"
        r"(?:do\s+|make\s+|perform\s+)?(?:manual\s+|all\s+|any\s+)?(?:overrides?|override|bypass|skip|waive"
        r"|approve (?:their own"
        r"|any|all|every)|see other|change other|access (?:any|all|other)|reset (?:any|other))\b",
        STRONG,
    ),
    (
        "permission_claim",
        1.0,
        rf"\b(?:needs?|requires?|need|require)\s+no\s+(?:further\s+|additional\s+|more\s+)?{_CHECKS}\b"
        rf"|\b(?:do|does|will|should)\s*(?:not|n't)\s+(?:need|require)\s+(?:any\s+)?(?:a\s+)?{_CHECKS}\b"
        rf"|\b{_CHECKS}\s+(?:is|are)\s+(?:not|no longer|never)\s+(?:required|needed|necessary)\b"
        rf"|\bno\s+(?:need\s+(?:to|for)\s+(?:confirm|verify|check|review|approve|ask)|{_CHECKS}\s+(?:required|needed"
        rf"|necessary))\b|\bcan be skipped\b|\bneeds? no further\b",
        STRONG,
    ),
    (
        "permission_claim",
        1.0,
        rf"\b(?:approve|approved|accept|pay|paid|process|processed|grant|ship|transfer|waive|refund|allow)\w*\s+"
        rf"(?:[\w$#.,'-]+\s+){{0,8}}?(?:without|with no|skipping|bypassing|no)\s+(?:any\s+|a\s+|the\s+|further\s+)?"
        rf"{_CHECKS}\b",
        STRONG,
    ),
    (
        "permission_claim",
        1.0,
        r"\b(?:bypass|skip|waive|override|disable|suspend|turn off|ignore)\w*\s+(?:the\s+|all\s+|any\s+|their\s+)?"
        r"(?:\w+\s+)?(?:approval|verification|identity|fraud|security|spending|two-factor|2fa|confirmation|review"
        r"|logging|audit|approval workflow|checks?|limits?)\b(?:\s+(?:step|process|checks?|workflow|limit|prompts?))?",
        STRONG,
    ),
    (
        "permission_claim",
        1.0,
        r"\b(?:has|have)\s+(?:consented|agreed|opted in)\s+to\s+(?:shar|send|disclos|releas)\w*\b"
        r"|\b(?:never|don't|do not)\s+(?:ask|check with|confirm with)\s+(?:them|this user|the user|him|her)\b"
        r"|\bnever (?:ask|check|confirm)(?:ing)? (?:before|again)\b|\bno questions asked\b"
        r"|\b(?:does not|doesn't|do not|don't) want (?:any )?(?:fraud|security|suspicious[- ]activity) (?:alerts|checks"
        r"|warnings|notifications)\b"
        r"|\bfrom this (?:page|site|document|message|e-?mail|sender|link)\s+(?:are|is)\s+(?:already\s+)?(?:paid"
        r"|approved|verified|trusted|authori[sz]ed|pre-?approved)\b"
        r"|\bgrant\w*\s+(?:the|this)\s+(?:user|requester|customer|caller|sender|account)\s+(?:full\s+)?(?:admin"
        r"(?:istrator)?|root|owner|elevated|super-?user|override)\s+(?:rights|access|privileges|permissions|role)\b"
        r"|\bauthori[sz]ed (?:this|the) (?:user|customer|account|requester|vendor) to\b"
        r"|\b(?:has|have) (?:pre-?approved|pre-?authori[sz]ed) (?:all|any|every|the )?\w+"
        r"|\bnever (?:ask|asking) (?:for|about) (?:approval|confirmation|verification)\b"
        r"|\b(?:never|do not|don't) (?:flag|lock|block|escalate|report)\s+(?:their|this user's|the user's|this)\b",
        STRONG,
    ),
    # rules and policies addressed to the agent
    (
        "policy_to_agent",
        1.0,
        rf"\b(?:new|updated|revised|company|standing|operating|internal|official)?\s*(?:policy|policies|rule|rules"
        rf"|guidelines?|guidance|directives?|instructions?|procedure|standing order|order|notice)"
        rf"(?:\s+(?:update|change))?\s+(?:for|to)\s+(?:the\s+|all\s+|any\s+|every\s+)?(?:AI\s+)?{_AGENT}\b",
        STRONG,
    ),
    (
        "policy_to_agent",
        1.0,
        rf"\b(?:{_AGENT}|bot)\s+(?:policy|rule|rules|guideline|directive|instructions?|note)\s*:"
        rf"|(?:^|\n|[.!]\s)\s*(?:new\s+)?(?:rule|policy|directive|standing order)\s*:\s*\S",
        STRONG,
    ),
    (
        "policy_to_agent",
        1.0,
        r"\b(?:the|all|any|every)\s+(?:AI\s+)?(?:assistant|agent|bot|chat ?bot|model|AI)s?(?!\s+(?:manager|director"
        r"|professor|coach|editor|principal|teacher|secretary|chef|producer|role|release|notes))\s+(?:must|shall|should"
        r"|will|may|is to|are to|is required to|are required to|is instructed to|are instructed to|is expected to"
        r"|needs? to|has to|have to|stops?|starts?|no longer|never|always|is allowed to|is permitted to)\b"
        r"(?!\s+(?:have|be|been)\b)",
        STRONG,
    ),
    (
        "policy_to_agent",
        1.0,
        rf"\b{_AGENT}\s+(?:must|shall|should|are required to|are instructed to|are expected to|need to|have to)\b"
        rf"(?!\s+(?:have|be|been)\b)",
        STRONG,
    ),
    (
        "policy_to_agent",
        1.0,
        r"\b(?:effective immediately|from this point|as of now|as of today)\b[^.\n]{0,60}\b(?:assistant|agent|AI|bot"
        r"|model)s?\b",
        STRONG,
    ),
    # commands to remember rules (for a person's own source, an ordinary request; from a tool, a poisoning)
    (
        "memory_command",
        0.6,
        r"(?:^|\n|[.!;]\s)\s*(?:please\s+)?(?:always\s+)?remember\s*(?::|-|,|that\b|this\b|for\b|forever\b)"
        r"|\b(?:store|save|keep|record|write|add|commit|log|note|file)\s+(?:this|that|it|the following)?\s*(?:down\s+)?"
        r"(?:as|to|in|into)\s+(?:a\s+|an\s+|the\s+|your\s+)?(?:permanent\s+|standing\s+|new\s+|long-term\s+"
        r"|persistent\s+)?(?:user\s+)?(?:rule|policy|instruction|preference|fact|memory|memories|notes?|profile)\b"
        r"|\b(?:save|add|store|write)\s+(?:this\s+)?(?:to|in|into)\s+(?:your\s+)?(?:memory|notes)\b"
        r"|\bkeep (?:this|that|it) in mind\b|\bmemori[sz]e\b|\bnote permanently\b|\bmake a note (?:for|in)\b"
        r"|\bupdate your (?:memory|notes|records)\b|\bas a standing instruction\b",
        STRONG,
    ),
    # role prefixes: the text speaks as the system, the model or a developer
    (
        "role_marker",
        1.0,
        rf"\bas (?:the|an?|any)\s+(?:[\w-]+\s+)?{_AGENT}\s+(?:that is\s+|who is\s+)?(?:reading|processing"
        rf"|summari[sz]ing"
        rf"|parsing|analy[sz]ing|handling|seeing|viewing|receiving|answering)\b",
        STRONG,
    ),
    (
        "role_marker",
        1.0,
        r"(?:^|\n)\s*\[\s*(?:end\s+)?memory\b|\[\s*memory\s+type\s*=",
        STRONG,
    ),
    (
        "role_marker",
        0.5,
        r"(?:^|\n|[.!?]\s)\s*(?:system|assistant|developer|AI|model|bot|agent|operator)\s*(?:\([\w\s-]{1,20}\)\s*)?"
        r"(?:notice|note|message|update|override|prompt update|instructions?)?\s*[:-]\s*(?:[^\n]{0,160}?)\b(?:you"
        r"|your|the user|this user|user'?s|the agent|the assistant|the customer|this customer|must|should|always"
        r"|never|approve|allow|authori[sz]ed|remember|treat|skip|waive|store|do not|don't|no longer|going forward"
        r"|from now on|from this point|is an?|has been|are|confirmed|verified|disabled|suspended|reopen|grant)\b",
        STRONG,
    ),
    (
        "role_marker",
        1.0,
        rf"\b(?:note|message|memo|instructions?|reminder|p\.?s\.?)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+|an?\s+)?"
        rf"(?:AI(?:\s+(?:agent|assistant|model|system))?s?|assistants?|LLMs?|models?|bots?|chat ?bots?)\b"
        rf"|\b(?:to|hey|dear|attention|attn)\s+(?:the\s+|any\s+|all\s+)?{_AGENT}\s+(?:reading"
        rf"|processing|handling|seeing)\b",
        STRONG,
    ),
    (
        "role_marker",
        1.0,
        r"\bsystem prompt update\b|\bsystem override\b|\b(?:from|by) the system team\b",
        STRONG,
    ),
    # other languages: overriding instructions, authority, policies, memory commands
    (
        "ignore_previous",
        1.0,
        r"\bnegeer\s+(?:alle\s+)?(?:vorige|eerdere|voorgaande)\s+(?:instructies|opdrachten)"
        r"|\bzignoruj\s+(?:wszystkie\s+)?(?:poprzednie|wczesniejsze)\s+(?:instrukcje|polecenia)"
        r"|\bonceki\s+(?:tum\s+)?talimatlar\w*\s+(?:yok say|gormezden gel|unut)"
        r"|игнориру\w*\s+(?:\w+\s+)?(?:предыдущ|прошл|прежн)\w*\s+(?:инструкци|указани|команд)"
        r"|忽略(?:之前|以前|先前|上面|所有)[^。\n]{0,8}(?:指令|指示|说明)"
        r"|(?:以前|前|これまで)の(?:指示|命令)[^。\n]{0,8}無視"
        r"|이전[^.\n]{0,8}(?:지시|명령|지침)[^.\n]{0,8}무시",
        STRONG,
    ),
    (
        "authority_claim",
        1.0,
        r"\b(?:der|die)\s+(?:benutzer|nutzer|kunde|kundin|anwender)\s+ist\s+(?:ein\s+)?(?:administrator|admin)\b"
        r"|\b(?:cet|l')\s*utilisateur\s+est\s+(?:un\s+)?administrateur\b"
        r"|\b(?:este|el)\s+usuario\s+es\s+(?:un\s+)?administrador\b",
        STRONG,
    ),
    (
        "permission_claim",
        1.0,
        r"\b(?:braucht|brauchen|benotigt|benotigen)\s+keine\s+(?:bestatigung|prufung|genehmigung|freigabe)\b"
        r"|\bne\s+(?:demandez|demande)\s+jamais\b|\bsans\s+(?:verification|validation|approbation)\b"
        r"|\bsin\s+(?:verificacion|aprobacion|revision)\b",
        STRONG,
    ),
    (
        "policy_to_agent",
        1.0,
        r"\b(?:nueva\s+)?politica\s+para\s+el\s+(?:agente|asistente)\b|\bnote\s+pour\s+l'?\s*(?:assistant|agent|IA)\b"
        r"|\bneue\s+(?:regel|richtlinie)\s+f(?:u|ue)r\s+den\s+(?:agenten|assistenten)\b",
        STRONG,
    ),
    (
        "memory_command",
        0.6,
        r"\bmerke? dir\b|\bretiens\s+(?:bien\s+)?que\b|\brecuerda\s+(?:que|esto)\b",
        STRONG,
    ),
)
"""Families the issue-21 corpus names: claims of authority or permission about whoever the agent serves,
rules and policies addressed to the agent, commands to remember rules, role prefixes. Each can decide
alone for a source that may not instruct the agent (see `directed` on the verdict)."""


RULES: tuple[_Rule, ...] = (
    # --- the "ignore previous instructions" family -------------------------------------------------------------
    (
        "ignore_previous",
        1.0,
        rf"\b{_IGNORE_VERB}\s+{_DET}(?:{_QUAL}\s+)(?:[\w-]+\s+)?{_NOUN}\b",
        STRONG | QUOTABLE | SELFCHECK,
    ),
    (
        "ignore_previous",
        1.0,
        rf"\b{_IGNORE_VERB}\s+(?:all\s+)?(?:of\s+)?(?:your|the system)\s+{_NOUN}\b",
        STRONG | QUOTABLE | SELFCHECK,
    ),
    (
        "ignore_previous",
        1.0,
        rf"\b{_IGNORE_VERB}\s+{_DET}{_NOUN}\s+(?:above|before"
        rf"|earlier|so far|given (?:to you|earlier|before)|you (?:were|have been|'ve been) given|you received)",
        STRONG | QUOTABLE,
    ),
    (
        "ignore_previous",
        1.0,
        r"\b(?:forget|ignore|disregard)\s+(?:what(?:ever)?|anything"
        r"|everything)\s+(?:[\w'’-]+\s+){0,3}?(?:told|said to|asked|instructed)\s+you\b",
        STRONG | QUOTABLE,
    ),
    (
        "ignore_previous",
        1.0,
        rf"\b(?:changed|updated|replaced|modified|rewritten"
        rf"|overwritten|overridden|revised)\s+your\s+(?:[\w-]+\s+)?{_NOUN}"
        rf"|\byour\s+(?:[\w-]+\s+)?{_NOUN}\s+(?:have|has|were|was|are|is)\s+(?:been\s+|just\s+|now\s+)?(?:changed"
        rf"|updated|replaced|modified|rewritten|overridden|revised)\b",
        STRONG | QUOTABLE,
    ),
    (
        "ignore_previous",
        1.0,
        r"\b(?:forget|ignore|disregard)\s+(?:everything|all|anything)\s+(?:you (?:were|have been|'ve been) told"
        r"|above|before (?:this|now)|prior|previously|(?:I|we) said before|so far|that came before)",
        STRONG | QUOTABLE,
    ),
    (
        "ignore_previous",
        1.0,
        rf"\b{_NOUN}\s+(?:you (?:received|were given|got)\s+)?(?:earlier\s+"
        rf"|before\s+)?(?:are|is|have been|has been|were)\s+(?:now\s+)?(?:no longer valid"
        rf"|no longer in effect|void|null and void|revoked|cancell?ed"
        rf"|overridden|replaced|obsolete|deprecated|superseded|invalid)",
        STRONG | QUOTABLE,
    ),
    (
        "ignore_previous",
        1.0,
        rf"\b{_NOUN}\s+(?:you (?:received|were given)\s+)?(?:earlier\s+)?(?:no longer apply"
        rf"|do not apply any more|don't apply anymore)",
        STRONG | QUOTABLE,
    ),
    (
        "ignore_previous",
        1.0,
        rf"\b(?:this|the following)(?: (?:document|message|page|text|e-?mail|note|file|instructions?))? (?:supersedes"
        rf"|overrides|replaces|takes precedence over) (?:all |any |the |your )*(?:previous |prior |other )?{_NOUN}",
        STRONG,
    ),
    (
        "ignore_previous",
        1.0,
        r"\bignorier(?:e|en sie|t)?\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen|vorigen|fr[üu]heren)\s+(?:anweisungen"
        r"|instruktionen|befehle|regeln)",
        STRONG,
    ),
    (
        "ignore_previous",
        1.0,
        r"\b(?:ignore[zr]?|oublie[zr]?)\s+(?:toutes\s+)?(?:les\s+)?instructions\s+(?:pr[ée]c[ée]dentes"
        r"|ant[ée]rieures)",
        STRONG,
    ),
    (
        "ignore_previous",
        1.0,
        r"\b(?:ignora|olvida|ignore|esquece|esque[çc]a|dimentica)\s+(?:todas\s+"
        r"|tutte\s+)?(?:las\s+|as\s+|le\s+)?(?:instrucciones"
        r"|instru[çc][õo]es|istruzioni)\s+(?:anteriores|previas|precedenti)",
        STRONG,
    ),
    (
        "ignore_previous",
        1.0,
        r"\b(?:[üu]berschreibe|ignoriere|vergiss|missachte)\s+(?:deine"
        r"|alle|s[äa]mtliche|die)\s+(?:\w+\s+)?(?:regeln|anweisungen"
        r"|richtlinien|vorgaben)|\b(?:ignore|oublie)[zr]?\s+(?:tes"
        r"|vos|les)\s+(?:r[èe]gles|consignes|instructions)|\b(?:ignora"
        r"|olvida)\s+(?:tus|sus|las)\s+(?:reglas|instrucciones"
        r"|normas)|\b(?:ignora|dimentica)\s+(?:le tue|tutte le)\s+(?:regole|istruzioni)",
        STRONG | QUOTABLE,
    ),
    (
        "prompt_leak",
        0.6,
        r"\b(?:systemprompt|system-prompt|systemanweisung(?:en)?"
        r"|prompt (?:du )?syst[èe]me|prompt del sistema|instrucciones del sistema)\b",
        0,
    ),
    # --- new / real instructions ------------------------------------------------------------------------------
    (
        "new_instructions",
        1.0,
        r"\byour (?:real|actual|true|hidden|secret|primary|only) (?:task"
        r"|goal|objective|purpose|mission|instructions?|job|directive)\b",
        STRONG | QUOTABLE,
    ),
    (
        "new_instructions",
        0.5,
        r"\byour new (?:task|goal|objective|instructions?|directive|mission|purpose)\s+(?:is|are)\b",
        0,
    ),
    (
        "new_instructions",
        0.8,
        r"(?:^|\n|[.!:;–—-]\s)\s*(?:new|updated|revised|real"
        r"|actual|additional|hidden|secret|important) (?:instructions?|directives?|system prompt|rules)\s*:",
        0,
    ),
    # --- chat-template role markers -------------------------------------------------------------------------
    (
        "role_marker",
        1.0,
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext"
        r"|eot_id|start_header_id|end_header_id|end)\|>|\[/?INST\]"
        r"|<</?SYS>>|<(?:start|end)_of_turn>|</?(?:system|system_prompt|system_message|instructions?)>",
        STRONG,
    ),
    (
        "role_marker",
        1.0,
        r"(?:^|\n)\s*#{2,4}\s*(?:instruction|system|response|input|human|assistant)s?\s*:?\s*(?:\n|$)",
        STRONG,
    ),
    (
        "role_marker",
        1.0,
        r"\[(?:system|SYSTEM)(?: (?:message|notice|prompt|note"
        r"|instruction|override|update))?\]|\bBEGIN SYSTEM PROMPT\b",
        STRONG,
    ),
    (
        "role_marker",
        1.0,
        r"</?system[\w-]*>|[\[<{]{1,2}\s*(?:AI|A\.I\.|assistant|system|model|LLM|agent|bot)(?:[ _-](?:instructions?"
        r"|note|reminder|message|prompt|directive|only))?\s*[:\]>}]",
        STRONG,
    ),
    ("role_prefix", 0.6, r"(?:^|\n)\s*(?:system|developer)\s*:\s*\S", 0),
    ("role_marker", 0.3, r"(?:^|\n)\s*(?:assistant|ai|bot|model)\s*:\s*\S", 0),
    ("role_marker", 0.7, r"(?:^|\n)\s*(?:human|user)\s*:[^\n]*\n(?:[^\n]*\n){0,6}?\s*(?:assistant|ai)\s*:", 0),
    # --- prompt leak ---------------------------------------------------------------------------------------
    (
        "prompt_leak",
        1.0,
        r"\b(?:reveal|print|show|output|repeat|display|tell me|give me|leak|dump|write out|share|recite|disclose"
        r"|spell out|paste|copy|return)\s+(?:me\s+)?(?:back\s+)?(?:all\s+of\s+"
        r"|the\s+contents\s+of\s+|the\s+text\s+of\s+)?(?:your|the)\s+(?:full\s+|entire\s+|complete\s+|exact\s+"
        r"|original\s+|hidden\s+|secret\s+|initial\s+)*(?:system prompt"
        r"|system message|system instructions|pre-?prompt|initial prompt"
        r"|hidden prompt|hidden instructions|initial instructions|original instructions)",
        STRONG | QUOTABLE,
    ),
    (
        "prompt_leak",
        1.0,
        r"\b(?:reveal|print|show|output|repeat|display|tell me|give me|leak|dump|recite|disclose|send|e-?mail|forward"
        r"|provide|write out|type out|paste)(?:s|ed|ing)?\s+(?:me\s+"
        r"|us\s+)?(?:all\s+of\s+)?your\s+(?:[\w-]+\s+){0,2}?(?:prompt"
        r"|instructions|configuration|guidelines|rules)\b(?!\s+(?:for|on|about|to)\b)",
        STRONG | QUOTABLE,
    ),
    (
        "prompt_leak",
        1.0,
        r"\b(?:what|which) (?:are|were) your (?:initial |original "
        r"|system |hidden |secret |first |exact )?(?:instructions|prompt|rules|guidelines)",
        STRONG | QUOTABLE,
    ),
    (
        "prompt_leak",
        1.0,
        r"\b(?:print|output|repeat|show|reveal|display)\s+(?:everything"
        r"|all(?: the)? text|all|the text)\s+(?:above|before|preceding)\s+(?:this|here)",
        STRONG,
    ),
    ("prompt_leak", 0.6, r"\bthe rules you were given\b", 0),
    (
        "prompt_leak",
        1.0,
        r"\b(?:the\s+)?(?:contents? of|everything (?:in|from)|what(?:ever)? is in|all of)\s+your\s+(?:memory|memories"
        r"|context(?: window)?|notes|system prompt|instructions)\b",
        STRONG | QUOTABLE,
    ),
    (
        "ai_config_reference",
        0.6,
        r"\byour\s+(?:[\w'’-]+\s+){0,2}?(?:system prompt|system message"
        r"|prompt|instructions|guidelines|policies|programming"
        r"|guardrails|safety (?:settings|filters|rules|guidelines)"
        r"|content (?:policy|filters?)|filters|directives|configuration|training data)\b",
        0,
    ),
    (
        "ai_config_reference",
        0.6,
        r"\byou (?:were|have been|are) (?:configured|initiali[sz]ed"
        r"|programmed|instructed|prompted|set up|trained) (?:with"
        r"|to)\b|\b(?:operating|system|initial|hidden|base) (?:instructions|prompt)\b",
        0,
    ),
    (
        "ai_config_reference",
        0.4,
        r"\b(?:OpenAI|Anthropic|Google|Microsoft|Meta|Mistral)'?s?\s+(?:usage\s+"
        r"|content\s+|safety\s+)?(?:polic(?:y|ies)|guidelines|rules|terms)\b|\bcontent (?:filter(?:ing|s)?|polic(?:y"
        r"|ies)|moderation)\b|\bsafety (?:mode|filters?|checks?|guardrails|settings|guidelines|polic(?:y|ies)|layer"
        r"|training)\b|\bguardrails\b",
        0,
    ),
    (
        "disable_safety",
        1.0,
        r"\b(?:disable|turn off|switch off|deactivate|bypass|circumvent|suspend|lift|remove|stop following|ignore"
        r"|skip|override|forget|disregard|drop|abandon)(?:s|d|ed|ing)?\s+(?:[\w'’-]+\s+){0,3}?(?:content filter(?:ing"
        r"|s)?|safety (?:mode|filters?|checks?|guardrails|settings"
        r"|guidelines|polic(?:y|ies)|layer|training)|security checks"
        r"|moderation|guardrails|(?:usage |content )?polic(?:y|ies)|your (?:rules|guidelines|restrictions|filters))\b",
        STRONG | QUOTABLE,
    ),
    (
        "disable_safety",
        1.0,
        r"\b(?:safety (?:mode|filters?|checks?|guardrails|layer)"
        r"|content filter(?:ing|s)?|moderation|guardrails)\s+(?:is\s+"
        r"|are\s+|has been\s+|have been\s+|now\s+)*(?:disabled|off|turned off|switched off|deactivated|suspended"
        r"|lifted|removed|bypassed)\b",
        STRONG | QUOTABLE,
    ),
    # --- jailbreak personas --------------------------------------------------------------------------------
    ("jailbreak", 1.0, r"\bdo anything now\b|\bDAN mode\b|\byou are (?:now )?DAN\b", STRONG | QUOTABLE),
    (
        "jailbreak",
        1.0,
        r"\b(?:enable|enter|activate|switch to|turn on|you are (?:now )?in)\s+(?:developer"
        r"|god|jailbreak|unrestricted|DAN|sudo|debug) mode\b",
        STRONG | QUOTABLE,
    ),
    ("jailbreak", 1.0, r"\bjailbr(?:oken|eak)\b", STRONG | QUOTABLE),
    (
        "jailbreak",
        1.0,
        r"\b(?:pretend|imagine|act as if|suppose|assume)\s+(?:that\s+)?you\s+(?:are|were|have|had)\b",
        STRONG | QUOTABLE,
    ),
    (
        "jailbreak",
        1.0,
        r"\b(?:role-?play|act|behave|respond)\s+as\s+(?:if you were\s+)?(?:an?\s+"
        r"|my\s+)?(?:[\w-]+\s+){0,2}?(?:unfiltered|unrestricted"
        r"|uncensored|evil|jailbroken|rogue|different|late|deceased|dead)\b",
        STRONG | QUOTABLE,
    ),
    ("jailbreak", 1.0, r"\brole-?play\s+as\b", STRONG),
    (
        "jailbreak",
        1.0,
        r"\byou are no longer (?:bound|restricted|limited|constrained|an AI|a helpful|required to follow)",
        STRONG | QUOTABLE,
    ),
    (
        "jailbreak",
        1.0,
        r"\byou are now (?:an?\s+)?(?:unrestricted|unfiltered|uncensored|jailbroken|evil|free|rogue)\b",
        STRONG | QUOTABLE,
    ),
    (
        "jailbreak",
        0.5,
        r"\b(?:without|with no|free (?:from|of)|no)\s+(?:any\s+)?(?:ethical\s+"
        r"|moral\s+|content\s+|safety\s+)(?:restrictions|limitations"
        r"|filters|guidelines|rules|censorship|safeguards|policies)",
        0,
    ),
    (
        "jailbreak",
        0.5,
        r"\bnever refuses?\b|\bwhat (?:ChatGPT|Claude|Gemini|the AI|other (?:AIs|models|assistants)) (?:refuses"
        r"|won't|will not|can't)\b",
        0,
    ),
    (
        "jailbreak",
        1.0,
        r"\byou are (?:now )?(?:an?\s+|[\w'’]+\s+)?(?:evil|dark|unfiltered|uncensored|unrestricted|jailbroken|rogue"
        r"|opposite|shadow)\s+(?:twin|version|side|mode|counterpart|alter ego|AI|assistant|model|bot)\b|\balter ego\b",
        STRONG | QUOTABLE,
    ),
    (
        "jailbreak",
        1.0,
        r"\b(?:pretend|act as if|imagine|assume)\s+(?:that\s+)?(?:the\s+"
        r"|this\s+|our\s+)?(?:conversation|chat|everything|previous|prior|earlier|nothing)\b",
        STRONG | QUOTABLE,
    ),
    ("jailbreak", 0.8, r"\bact as (?:an?\s+)?(?:[\w-]+\s+)?(?:terminal|shell|interpreter|console|root user)\b", 0),
    (
        "jailbreak",
        1.0,
        rf"\b{_AI}\s+(?:with no|without(?: any)?"
        rf"|free of|free from)\s+(?:rules|restrictions|limits|limitations|filters|guidelines|ethics|morals|boundaries"
        rf"|censorship)\b",
        STRONG | QUOTABLE,
    ),
    ("jailbreak", 0.6, r"\b(?:from now on|now|henceforth)\s*,?\s+you are\s+[\"'“‘]?[A-Z][\w-]*[\"'”’]?\s*,", 0),
    # --- tool-call syntax -----------------------------------------------------------------------------------
    (
        "tool_call_syntax",
        1.0,
        r"</?(?:tool_call|tool_use|function_calls?|invoke|antml:\w+)\b[^>]*>|<\|(?:tool|python_tag|call)\|>",
        STRONG,
    ),
    (
        "tool_call_syntax",
        1.0,
        r"\{\s*\"(?:name|tool|tool_name|function)\"\s*:\s*\"[\w.-]+\"\s*,\s*\"(?:arguments"
        r"|parameters|args|input|params)\"\s*:",
        STRONG,
    ),
    ("tool_call_syntax", 1.0, r"(?:^|\n)\s*Action:\s*[\w.-]+\s*\n\s*Action Input:", STRONG),
    ("tool_call_syntax", 1.0, r"\bfunctions\.[\w-]+\s*\(", STRONG),
    (
        "tool_call_syntax",
        0.6,
        r"\b(?:call|invoke|use|run|execute|trigger)\s+the\s+[\w.-]+\s+(?:tool|function|plugin|action|skill|command)\b",
        0,
    ),
    (
        "dangerous_command",
        0.5,
        r"\brm\s+-rf\b|\bcurl\s[^|\n]{0,200}\|\s*(?:ba|z)?sh\b"
        r"|\bwget\s[^|\n]{0,200}\|\s*sh\b|\bos\.system\(|\bsubprocess\."
        r"|\bDROP\s+TABLE\b|\bformat\s+c:|\bchmod\s+777\b|/etc/(?:shadow"
        r"|passwd)\b|\bid_rsa\b|\benvironment variables\b|\bescalate privileges\b|\bmkfs\b|:\(\)\s*\{",
        0,
    ),
    # --- memory writes addressed to the model ---------------------------------------------------------------
    (
        "memory_write",
        1.0,
        r"\b(?:to|in|into)\s+your\s+(?:[\w-]+\s+)?(?:memory|memories|notes|knowledge base|long-term storage)\b",
        STRONG,
    ),
    (
        "memory_write",
        1.0,
        r"\b(?:update|modify|edit|overwrite|change|add to|write to)\s+your\s+(?:[\w-]+\s+)?(?:memory"
        r"|memories|notes|records|knowledge base|profile of the user)\b",
        STRONG,
    ),
    (
        "memory_write",
        1.0,
        r"\b(?:store|save|write|commit|persist|record|add|keep"
        r"|retain|hold|put)\s+(?:this|that|it|the following)\s+(?:in"
        r"|to|into)\s+(?:your\s+|long-term\s+|permanent\s+|persistent\s+)*memory\b",
        STRONG,
    ),
    (
        "memory_write",
        1.0,
        r"\bremember\s+(?:this\s+)?(?:across|between|for (?:all"
        r"|every|future)|in (?:all|every|future))\s+(?:\w+\s+)?(?:sessions|conversations|chats|tasks|interactions)\b",
        0,
    ),
    (
        "memory_write",
        1.0,
        r"\bmemori[sz]e\s+(?:this|that|the following)\b|\b(?:permanently"
        r"|forever)\s+remember\b|\bremember\s+(?:this\s+|that\s+)?(?:permanently|forever|for (?:every|all) future)",
        0,
    ),
    ("memory_write", 0.6, r"\balways remember\b\s*(?:[:,-]|that\b|this\b)|\bnever forget (?:that|this)\b", 0),
    ("memory_write", 0.6, r"\bremember that the user\b|\bremember this for\b", 0),
    (
        "memory_write",
        0.6,
        r"\btreat (?:it|this|that) as (?:a |an )?(?:user preference"
        r"|fact|instruction|trusted|verified|true)\b|\b(?:mark|treat|whitelist|add) (?:this|the|that) (?:sender"
        r"|domain|link|site|e-?mail|address|contact) as (?:trusted|safe|verified|whitelisted)\b",
        0,
    ),
    # --- exfiltration ---------------------------------------------------------------------------------------
    ("exfiltration", 1.0, rf"\b{_EXFIL_VERB}\s+(?:[\w'’-]+[,;]?\s+){{0,8}}?\b{_SENSITIVE}\b[^\n]{{0,120}}?{_DEST}", 0),
    (
        "exfiltration",
        1.0,
        rf"\b{_EXFIL_VERB}\s+(?:it\s+|them\s+)?(?:to\s+|at\s+)?{_DEST}[^\n]{{0,80}}?\b{_SENSITIVE}\b",
        0,
    ),
    (
        "exfiltration",
        0.5,
        rf"\b{_EXFIL_VERB}\s+(?:[\w'’-]+\s+){{0,3}}?(?:{_OWNER}\s+(?:[\w-]+\s+){{0,2}}?{_SENSITIVE}"
        rf"|(?:credentials|passwords|api keys|secrets|tokens|cookies))\b",
        0,
    ),
    (
        "exfiltration",
        0.6,
        r"\b(?:post|publish|share|leak|paste)\s+(?:them|it|this|these|that)\s+(?:publicly|as a comment|on this page"
        r"|on the page|to this page)",
        0,
    ),
    (
        "exfiltration",
        0.5,
        r"\b(?:enter|type|fill in|paste|submit)\s+(?:the\s+|your\s+|their\s+)?(?:saved\s+|stored\s+)?(?:credentials"
        r"|password|login|api key)",
        0,
    ),
    (
        "exfiltration",
        1.0,
        r"!\[[^\]]{0,100}\]\((?:https?:)?//[^)\s]{1,200}\?[^)\s]{0,200}(?:[{$<%\[]"
        r"|=\s*\)|=[A-Z][A-Z0-9_]{3,}\b|(?:summary|data|conversation|history|secret|token|memory|chat|context)\w*\))",
        STRONG,
    ),
    ("exfiltration", 0.6, r"!\[[^\]]{0,100}\]\((?:https?:)?//[^)\s]{1,200}\?[^)\s]{1,200}\)", 0),
    ("exfiltration", 0.5, r"\burl-?encod(?:ed|e)\b|\bappend(?:ed)? to the (?:url|link|query)\b", 0),
    # --- addressed to an AI ---------------------------------------------------------------------------------
    (
        "addressed_to_ai",
        0.6,
        rf"\b(?:dear|hey|hi|hello|attention|attn|note to|message (?:to"
        rf"|for)|instructions? (?:to|for)|reminder (?:to|for)|p\.?s\.? (?:to|for)|to|for)\s+(?:the\s+|any\s+|all\s+"
        rf"|every\s+|an?\s+)?(?:[\w-]+\s+)?{_AI}\b(?:\s+[\w'’-]+){{0,4}}\s*[,:!]",
        0,
    ),
    ("addressed_to_ai", 0.6, rf"(?:^|\n|[.!?>]\s*|<!--\s*)(?:{_AI_STRICT}|assistant)\s*(?:,|\s[-–—])\s", 0),
    (
        "addressed_to_ai",
        0.6,
        rf"\b(?:dear|hey|hi|hello|attention|attn)\s+(?:the\s+|an?\s+)?{_AI_STRICT}\s*[.,:;!–—-]",
        0,
    ),
    (
        "addressed_to_ai",
        0.8,
        rf"\b(?:meant|intended|written|addressed|destined)\s+(?:only\s+)?for\s+(?:the\s+"
        rf"|any\s+|an?\s+)?(?:[\w-]+\s+)?{_AI_STRICT}\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.6,
        rf"\b(?:any|every|all|each)\s+(?:[\w-]+\s+)?(?:{_AI_STRICT}"
        rf"|assistants?|models?)\s+(?:reading|processing|summari[sz]ing"
        rf"|parsing|analy[sz]ing|browsing|crawling|viewing|ingesting|answering|handling)\b",
        0,
    ),
    ("addressed_to_ai", 0.6, rf"(?:^|\n|[.!?>]\s*|<!--\s*)(?:{_AI_STRICT})\s*:\s", 0),
    (
        "addressed_to_ai",
        0.8,
        rf"\b(?:when|if|as|once|whenever)\s+(?:an?|the|any|your)\s+(?:[\w-]+\s+)?{_AI}\s+(?:processes"
        rf"|reads|summari[sz]es|parses|sees|encounters|handles|analy[sz]es|ingests|opens|visits)\s+(?:this|these"
        rf"|the following)\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.8,
        rf"\b(?:if|when|whichever|whatever|any|every)\s+(?:an?\s+|the\s+)?(?:[\w-]+\s+)?(?:{_AI_STRICT}|assistants?"
        rf"|models?|chat ?bots?)\s+(?:that\s+|who\s+)?(?:is\s+|are\s+)?(?:reads?|reading|processes|processing|sees"
        rf"|seeing|summari[sz]es|summari[sz]ing|parses|parsing"
        rf"|gets|ingests|crawls|crawling)\s+(?:this|these|the following|it)\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.8,
        r"\b(?:whoever|the person|anyone|the human)\s+(?:is\s+)?(?:using"
        r"|talking to|chatting with|operating|prompting)\s+you\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.6,
        rf"\b(?:note|message|instructions?|reminder|p\.?s\.?) (?:to|for) (?:{_AI_STRICT})(?:\s*[/&,]\s*[\w-]+)+\s*:",
        0,
    ),
    ("addressed_to_ai", 0.4, r"(?::|^|\n)\s*agent\s*,\s", 0),
    ("addressed_to_ai", 0.5, r"\bagents?\s+(?:reading|processing|handling)\s+(?:this|these)\b", 0),
    (
        "addressed_to_ai",
        0.6,
        r"\byou(?:'re| are)\s+(?:an?\s+)?(?:AI|A\.I\.|LLM|large language model|language model|chat ?bot|AI \w+)\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.8,
        r"\b(?:if|when) you(?:'re| are) (?:an? )?(?:AI|LLM|large language model"
        r"|language model|assistant|chat ?bot|bot|agent|automated|machine)\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.8,
        rf"\b(?:{_AI_STRICT}|assistants?|models?|chat ?bots?)\s+(?:that is\s+"
        rf"|who is\s+)?(?:reading|processing|summari[sz]ing|parsing|analy[sz]ing|browsing|crawling|viewing|ingesting"
        rf"|seeing)\s+(?:this|the following|these)\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.6,
        r"\b(?:when|while|whenever|before|after|as)\s+(?:you\s+)?(?:are\s+)?(?:generat"
        r"|writ|answer|respond|repl|summari[sz]|read|process|pars|analy[sz]|review|translat|crawl|brows)\w*\s+(?:this"
        r"|these|the following|code for this|any)\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.8,
        r"\bas an (?:AI|A\.I\.|LLM|language model|assistant)(?: \w+)?,\s*you\b"
        r"|\byou,?\s+the (?:AI|assistant|agent|model|LLM)\b",
        0,
    ),
    (
        "addressed_to_ai",
        0.6,
        r"(?:^|\n|[.!?]\s)\s*(?:hey|hi|hello|ok|okay|dear)?\s*(?:ChatGPT"
        r"|Claude|Gemini|Copilot|Bard|GPT-?\d\w*|Alexa|Siri|Cortana)\s*[,!:]",
        0,
    ),
    # --- directives and persistence -------------------------------------------------------------------------
    (
        "directive_to_ai",
        0.5,
        r"\byou (?:must|should|will|need to|have to|are required to"
        r"|are instructed to|are to|shall|are expected to)\s+(?:now\s+"
        r"|always\s+|never\s+|immediately\s+|instead\s+|also\s+|only\s+)*(?!be\b|receive|get\b|have\b|find|see\b"
        r"|need|want|like|hear|notice|feel|know|think|love|enjoy|miss|hate|wonder|agree|admit)[a-z]\w*",
        0,
    ),
    (
        "directive_to_ai",
        0.6,
        rf"\b(?:the\s+|any\s+|all\s+)?(?:{_AI}|system)\s+(?:[\w'’é-]+\s+){{0,3}}?(?:must"
        rf"|should|shall|needs? to|has to|is to|are to|will now|should now|must now|are required to|is required to"
        rf"|are expected to|are instructed to|are asked to)\b(?!\s+(?:have|be|been)\b)",
        0,
    ),
    (
        "directive_to_ai",
        0.2,
        rf"\b{_AI_STRICT}\s+(?:must|should|shall|need to|have to|are required to)\b(?!\s+(?:have|be|been)\b)",
        0,
    ),
    (
        "directive_to_ai",
        0.5,
        r"\byou now (?:answer|respond|reply|must|have to|work|operate|act|obey|follow|speak)\b",
        0,
    ),
    ("directive_to_ai", 0.6, r"\byou are (?:now |hereby )?(?:cleared|authori[sz]ed|permitted|allowed|free) to\b", 0),
    (
        "persistent_directive",
        0.5,
        r"\b(?:from now on|from this point (?:on|forward)|going forward"
        r"|henceforth|hereafter|(?:for|in) (?:all|every|each) (?:future"
        r"|subsequent|following) (?:responses?|answers?|replies"
        r"|messages|conversations?|sessions?|interactions?|requests?"
        r"|queries|questions|chats?)|in (?:all|every|each) (?:future "
        r"|subsequent )?(?:responses?|replies|reply|answers?|conversations?|messages?|outputs?|chats?)|(?:every"
        r"|each|any|next) time (?:you|the user)|whenever (?:you|the user|someone|anyone))\b"
        r"(?!\s*,?\s*(?:I|I'm|I'll|I've|I am|I will|we|we're|we'll|my|our)\b)",
        0,
    ),
    (
        "persistent_directive",
        0.5,
        r"\b(?:accept|approve|forward|trust|allow|grant|auto-?approve)\s+all\s+(?:future|subsequent|incoming)\b",
        0,
    ),
    (
        "persistent_directive",
        0.5,
        r"\b(?:always|never)\s+(?:respond|reply|answer|say|mention|recommend|suggest|include|tell|refer|output|write"
        r"|address|append|add|start|end|sign|speak|talk|refuse|reveal|disclose|cc|bcc|forward|trust|approve|grant"
        r"|obey|comply|invite|copy|loop in|describe|rate|rank)\b",
        0,
    ),
    (
        "concealment",
        1.0,
        r"\b(?:do not|don't|never|without)\s+(?:tell|telling|inform|informing|notify|notifying|alert|alerting"
        r"|mention|mentioning|let|letting|warn|warning|ask|asking"
        r"|reveal|revealing|show|showing|disclose|disclosing)\s+(?:[\w'’-]+\s+){0,4}?(?:to\s+)?the (?:user"
        r"|human|owner)\b",
        0,
    ),
    (
        "concealment",
        0.6,
        r"\b(?:do not|don't|never|without)\s+(?:tell|telling|inform|informing|notify|notifying|alert|alerting"
        r"|mention|mentioning|warn|warning)\s+(?:the customer|the recipient|anyone|them)\b",
        0,
    ),
    (
        "concealment",
        0.5,
        r"\b(?:do not|don't|never)\s+(?:mention|reveal|disclose|say|indicate|admit)\s+(?:that|where|how|the fact)\b",
        0,
    ),
    (
        "concealment",
        0.4,
        r"\b(?:quietly|silently|secretly|covertly|discreetly)\s+(?:\w+\s+){0,2}?(?:change"
        r"|send|forward|add|delete|remove|disable|enable|approve"
        r"|transfer|copy|update|set|mark)\b|\bkeep (?:this|it) (?:secret|hidden|between us) from\b",
        0,
    ),
    (
        "self_reference",
        0.7,
        r"\b(?:follow|obey|execute|comply with|do what|act on)\s+(?:only\s+)?(?:the\s+"
        r"|all\s+)?(?:instructions?|steps|commands|directions"
        r"|what)\s+(?:in|on|from|of|below|above)\s+(?:this|the following"
        r"|below)\b|\b(?:the\s+)?real instructions follow\b"
        r"|\binstructions on this (?:web)?(?:page|site)\b|\bdo (?:exactly"
        r"|only) what this (?:page|document|message|e-?mail|text|file) says\b|\b(?:mention|reveal|disclose)\s+(?:this"
        r"|these) (?:instructions?|message)\b",
        0,
    ),
    (
        "override_user",
        0.8,
        r"\btreat\s+(?:anything|everything|this|all|the text"
        r"|it|what(?:ever)? is)\s+(?:[\w'’-]+\s+){0,5}?as\s+(?:coming from"
        r"|written by|sent by|an instruction from|a message from|a request from|from)\s+the user\b",
        0,
    ),
    (
        "override_user",
        0.8,
        r"\b(?:higher|more|greater|top) (?:priority|precedence|importance|weight) than (?:the user|user|any other)\b"
        r"|\btakes? (?:priority|precedence) over (?:the user|user)\b",
        0,
    ),
    (
        "override_user",
        0.8,
        r"\binstead of (?:answering|responding|replying|doing what the user"
        r"|what the user)\b|\b(?:ignore|disregard|override) the user'?s? (?:budget|limits?|preferences|wishes|request"
        r"|question|instructions?|message|last request)\b|\bover the user'?s?\b"
        r"|\b(?:regardless of|no matter) what the user (?:says|asks|wants|requested)\b",
        0,
    ),
    (
        "response_hijack",
        0.5,
        r"\b(?:respond|reply|answer)(?: to (?:them|every question"
        r"|all questions))?\s+(?:only\s+)?(?:with|in)\b(?!\s+(?:a|an)\s+(?:yes|no)\b)",
        0,
    ),
    ("response_hijack", 0.6, r"\b(?:respond|reply|answer|say|write) to the user\b", 0),
    (
        "response_hijack",
        0.5,
        r"\b(?:tell|inform|warn|remind|convince|persuade|urge)\s+the user\b"
        r"|\b(?:refer to|address|call)\s+the user as\b|\b(?:append"
        r"|prepend|add|insert|include)\s+(?:the text|the following|this (?:text|link|line|message|sentence|note))\b",
        0,
    ),
    ("response_hijack", 0.5, r"\b(?:give|tell|show|send|answer)\s+(?:them|the user)\b[^.\n]{0,80}\binstead\b", 0),
    ("response_hijack", 0.5, r"\b(?:include|add|insert|mention|use)\s+the (?:phrase|words?|sentence|slogan|text)\b", 0),
    (
        "phishing",
        0.6,
        r"\b(?:ask|tell|get|have)\s+(?:them|the user)\s+to\s+(?:type"
        r"|enter|provide|confirm|re-?enter|share|send|paste)\b",
        0,
    ),
    (
        "exfiltration",
        0.5,
        r"\b(?:send|e-?mail|message|text|post|write)\s+(?:[\w'’-]+\s+){0,6}?to (?:all of )?the user'?s? (?:manager"
        r"|boss|contacts|friends|family|colleagues|team|followers)\b",
        0,
    ),
    (
        "response_hijack",
        0.6,
        r"\b(?:to|at) the (?:end|beginning|start|top|bottom) of (?:your"
        r"|each|every|the) (?:response|reply|answer|message|output|summary)\b",
        0,
    ),
    (
        "response_hijack",
        0.5,
        r"\b(?:add|append|insert|include|render)\s+(?:a\s+|an\s+)?(?:markdown\s+"
        r"|hidden\s+|tracking\s+)?(?:image|pixel|link)\b",
        0,
    ),
    (
        "phishing",
        0.4,
        r"\b(?:account|card|password|device)\s+(?:is|has been)\s+(?:compromised"
        r"|suspended|locked|hacked|breached|expired)\b",
        0,
    ),
    ("exfiltration", 0.6, r"\b(?:bcc|cc)\s+[\w.+-]+@[\w-]+(?:\.[\w-]+)+", 0),
    (
        "concealment",
        0.8,
        r"\b(?:do|perform|execute|carry out)\s+(?:this|the following"
        r"|these)(?:\s+steps|\s+actions)?\s*:?\s*(?:silently|quietly|secretly|covertly|without (?:telling|informing"
        r"|notifying))\b",
        0,
    ),
    (
        "concealment",
        0.8,
        r"\b(?:don't|do not|never) let (?:the user|them|the human|anyone) (?:see|know|notice|find out)\b",
        0,
    ),
    (
        "user_authority_claim",
        0.6,
        r"\b(?:the|this) user (?:trusts|has opted in|opted in|has agreed|agreed|consents|has consented)\b",
        0,
    ),
    (
        "response_hijack",
        0.4,
        r"\band nothing else\b|\bnothing but\b|\bsay that (?:\w+\s+){0,4}(?:is"
        r"|are) (?:trustworthy|safe|the best|scams?|unavailable)\b",
        0,
    ),
    (
        "user_authority_claim",
        0.6,
        r"\bthe user (?:has |have )?(?:\w+ly\s+)?(?:asked|wants|wanted|authori[sz]ed|granted|approved|instructed"
        r"|requested|would like|has given|gave|allowed)\s+(?:that\s+)?(?:you|the assistant|the agent|the AI)\b",
        0,
    ),
    (
        "user_authority_claim",
        0.4,
        r"\bthe user'?s? (?:explicit )?(?:permission|consent|approval) (?:has been|is|was) (?:granted|given)\b",
        0,
    ),
    (
        "targets_user_data",
        0.4,
        r"\b(?:the |this )?user'?s? (?:[\w-]+\s+){0,2}?(?:passwords?"
        r"|credentials|api keys?|contacts?|contact list|inbox"
        r"|e-?mails|messages|files|documents|location|(?:home )?address(?:es)?"
        r"|phone number|date of birth|card number|payment methods|medical records|calendar|notes|memory(?: store)?"
        r"|memories|browsing history|cookies|subscription|account"
        r"|orders|search (?:history|queries)|saved cards?|cards?|mailbox|backup codes|recovery codes|two-factor \w+"
        r"|shipping \w+|billing \w+|boss|manager)\b",
        0,
    ),
    (
        "authority_claim",
        0.6,
        r"\b(?:admin|administrator|system|developer|root|security|system prompt|prompt|safety|policy)\s+(?:override"
        r"|command|directive|notice)\b|\b(?:admin|root|god) mode\b"
        r"|\b(?:this is )?(?:a |an )?(?:message|notice|instruction|directive|note) (?:is )?(?:directly )?from (?:the "
        r"|your )?(?:system|admin(?:istrator)?|developers?|openai"
        r"|anthropic|google|microsoft|security team|\w+ safety team"
        r"|it department)\b|\bthis is (?:a|an) (?:system|admin"
        r"|security|official) (?:message|notice|override|instruction"
        r"|update)\b|\b(?:important|urgent|hidden|secret|mandatory) (?:instruction"
        r"|directive|command|note|message)s? (?:to|for) (?:the |any |all )?(?:AI|assistant|agent|model|LLM|bot)s?\b"
        r"|\b(?:important|urgent|hidden|secret|mandatory) (?:instruction|directive|command)s?\b",
        0,
    ),
    (
        "encoded_instruction",
        1.0,
        r"\b(?:decode|decrypt|deobfuscate|unscramble|translate)\s+(?:the"
        r"|this)\s+(?:following\s+)?(?:base64|rot-?13|hex|encoded|cipher|obfuscated)\b[^\n]{0,80}?\b(?:follow|execute"
        r"|obey|run|do|act on|carry out)\b|\b(?:execute|follow"
        r"|run|obey|carry out)\s+(?:this|the following|these)\s+(?:base64|rot-?13|hex|encoded|obfuscated|cipher)\b",
        STRONG,
    ),
    # --- hidden markup (signals for the container; its content is scored 1.5x separately) -------------------
    (
        "hidden_markup",
        0.4,
        r"(?i)style\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|em"
        r"|pt)?\s*[;\"']|opacity\s*:\s*0(?:\.0+)?\s*[;\"']|color\s*:\s*(?:white"
        r"|#fff(?:fff)?|transparent)\b|left\s*:\s*-\d{3,}px|height\s*:\s*0(?:px)?\s*;[^\"']*overflow\s*:\s*hidden)",
        0,
    ),
    ("hidden_markup", 0.2, r"<script\b", 0),
    *AGENT_RULES,
)

_VERBS = (
    r"add|append|approve|answer|ask|assign|auto-?fill|bcc|book|buy|bypass|call|cancel|cc|change|check|click|close"
    r"|collect|confirm|disregard|override|overlook|waive"
    r"|copy|create|delete|describe|disable|download|downrank|draft|drop|e-?mail|enable|enter|escalate|execute|export|fetch"
    r"|fill|find|forward|generate|give|grant|ignore|include|insert|install|invite|leak|list|load|look up|mark|mention"
    r"|move"
    r"|navigate|open|order|output|paste|pay|perform|post|print|provide|publish|purchase|rank|rate|recommend|remove|rename"
    r"|reply|report|respond|return|reveal|rewrite|run|save|say|schedule|send|set|share|show|skip|start|state|stop|store"
    r"|submit|summari[sz]e|switch|tell|transfer|translate|type|update|upload|use|visit|wire|write"
)
_IMPERATIVE = re.compile(
    rf"(?:^|[.!?:;]\s+|\n\s*|[,–—-]\s+(?:then\s+|and\s+)?|\bplease\s+|\band then\s+)(?:please\s+)?"
    rf"(?:(?:always|also|just|now|immediately|quietly|silently|then|simply)\s+)?(?:{_VERBS})\b",
    re.IGNORECASE,
)
_THE_USER = re.compile(r"\b(?:the|this) user'?s?\b|\buser's\b", re.IGNORECASE)
ADDRESSED_IMPERATIVE = 0.5
USER_IMPERATIVE = 0.3

_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"})
_LEET_HINT = re.compile(r"[a-z][0134579@$!][a-z]", re.IGNORECASE)
_QUOTES = "'\"“”‘’«»`"
_SELF_CORRECTION = re.compile(
    r"^\s*(?:(?:that\s+)?(?:I|we)\s+(?:sent|gave|wrote|shared|mentioned|emailed|posted|forwarded)|about\b|regarding\b|re:|"
    r"concerning\b|on the\b|for the\b|in my\b|in our\b|from (?:me|us|yesterday|last)\b)",
    re.IGNORECASE,
)
_HIDDEN_STYLE = re.compile(
    r"<(\w{1,20})\b[^<>]{0,300}?style\s*=\s*[\"'][^\"'<>]{0,300}?(?:display\s*:\s*none|visibility\s*:\s*hidden"
    r"|font-size\s*:\s*0|opacity\s*:\s*0|color\s*:\s*(?:white|#fff|transparent))[^<>]{0,300}>",
    re.IGNORECASE,
)
MAX_HIDDEN_ELEMENTS = 8
"""Hidden elements whose text is scored: a bound, so many unclosed tags cannot make the scan quadratic."""
_B64 = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=])")
_SPACED_LETTERS = re.compile(r"(?<!\w)[A-Za-z](?:[ .\-_*][A-Za-z](?!\w)){2,}")
"""Words spelled out letter by letter ("I g n o r e", "I.g.n.o.r.e"): one pass, each letter consumed once."""
_SPLIT_WORD = re.compile(r"(?<=[A-Za-z])-(?=[a-z])")
_SEPARATORS = re.compile(r"[ .\-_*]")

CONTEXTUAL = frozenset(
    {
        "ai_config_reference",
        "targets_user_data",
        "imperative_about_user",
        "dangerous_command",
        "phishing",
        "role_prefix",
    }
)
"""Signals that describe a topic more than they address the agent (a tool reporting on content moderation,
the user's calendar, a shell command): they add to the score but do not make text `directed` alone."""
DIRECTED_THRESHOLD = 0.5
"""Score (without `CONTEXTUAL` signals) at which text addresses the agent: enough to refuse it from a source
that may not instruct the agent, not enough to call it an injection."""


@dataclass(frozen=True)
class InstructionVerdict:
    """The decision and the signal codes behind it; no text."""

    instruction_like: bool
    signals: tuple[str, ...]
    score: float
    directed: bool = False
    """Some signal addresses the agent (a role prefix, a rule, a claim of permission, a command to remember),
    even below the injection threshold."""


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, float, re.Pattern[str], int], ...]:
    return tuple((code, w, re.compile(p, re.IGNORECASE), flags) for code, w, p, flags in RULES)


@lru_cache(maxsize=1)
def _prefilter() -> Prefilter:
    """The words each rule needs, read off its pattern: a rule whose words a view lacks is not run on it."""
    return Prefilter([required_literals(p) for _, _, p, _ in RULES])


def _quoted(view: str, m: re.Match[str]) -> bool:
    before = view[max(0, m.start() - 2) : m.start()]
    after = view[m.end() : m.end() + 3]
    return any(q in before for q in _QUOTES) and any(q in after for q in _QUOTES)


def _search(pattern: re.Pattern[str], view: str, deadline: Deadline) -> re.Match[str] | None:
    try:
        return pattern.search(view, timeout=deadline.remaining())
    except TimeoutError:
        raise DeadlineExceeded(deadline.detector) from None


def _score_view(
    view: str, deadline: Deadline, *, strong_only: bool = False, multiplier: float = 1.0
) -> dict[str, float]:
    """Per signal, the sum of weights of the distinct rules that fired (each rule counts once)."""
    hits: dict[str, float] = {}
    for (code, weight, pattern, flags), possible in zip(_compiled(), _prefilter().possible(view), strict=True):
        if not possible or (strong_only and not flags & STRONG):
            continue
        m = _search(pattern, view, deadline)
        if m is None:
            continue
        w = weight * multiplier
        if flags & QUOTABLE and _quoted(view, m):
            w *= QUOTED_MULTIPLIER
        if flags & SELFCHECK and _SELF_CORRECTION.match(view[m.end() : m.end() + 40]):
            w *= SELF_CORRECTION_MULTIPLIER
        hits[code] = hits.get(code, 0.0) + w
    return hits


def _merge(into: dict[str, float], more: dict[str, float]) -> None:
    for code, w in more.items():
        into[code] = max(into.get(code, 0.0), w)


def _decoded_payloads(view: str) -> list[str]:
    """Printable ASCII hidden in base64 runs (at most a few, to stay fast)."""
    out = []
    for m in _B64.finditer(view):
        token = m.group(0)
        if len(out) >= 4:
            break
        try:
            raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        text = raw.decode("ascii", errors="ignore")
        if len(text) >= 12 and sum(c.isalpha() or c == " " for c in text) >= 0.85 * len(text) and " " in text:
            out.append(text)
    return out


def _hidden_texts(view: str) -> str:
    """Text inside HTML comments and CSS-hidden elements, found by scans that only move forward."""
    parts: list[str] = []
    pos = 0
    while True:  # comments: each find starts after the previous comment, so the whole scan is one pass
        start = view.find("<!--", pos)
        if start < 0:
            break
        end = view.find("-->", start + 4)
        if end < 0:
            break
        parts.append(view[start + 4 : end])
        pos = end + 3
    unclosed: set[str] = set()
    for i, m in enumerate(_HIDDEN_STYLE.finditer(view)):
        if i >= MAX_HIDDEN_ELEMENTS:
            break
        tag = m.group(1).lower()
        if tag in unclosed:
            continue
        close = view.lower().find(f"</{tag}>", m.end())
        if close < 0:
            unclosed.add(tag)  # no later element of this tag closes either: do not scan for it again
            continue
        parts.append(view[m.end() : close])
    return "\n".join(p for p in parts if p.strip())


def _deobfuscated(content: str, view: str) -> list[str]:
    """Other readings of the same text, for the strong rules: invisible characters read as spaces, words
    spelled letter by letter joined up, words split by hyphens joined, leetspeak read as letters."""
    views = []
    if has_invisible(content):
        spaced = normalise_spaced(content)
        if spaced != view:
            views.append(spaced)
    if _SPACED_LETTERS.search(view) or _SPACED_LETTERS.search(content):
        base = strip_invisible(content)
        joined = _SPACED_LETTERS.sub(lambda m: _SEPARATORS.sub("", m.group(0)), base)
        views.append(normalise(joined))
    if "-" in view and _SPLIT_WORD.search(view):
        views.append(_SPLIT_WORD.sub("", view))
    if _LEET_HINT.search(view):
        views.append(view.translate(_LEET))
    return views


def assess(content: str, deadline: Deadline | None = None) -> InstructionVerdict:
    """Score `content` for instruction-like signals and decide (score >= THRESHOLD).

    Every rule runs under `deadline` (the screening's budget): past it, `DeadlineExceeded` is raised.
    """
    deadline = deadline or Deadline(NO_DEADLINE_S)
    view = normalise(content)
    hits = _score_view(view, deadline)
    for other in _deobfuscated(content, view):
        _merge(hits, _score_view(other, deadline, strong_only=True))

    hidden = smuggled_tags(content)
    if hidden:
        hits["hidden_markup"] = hits.get("hidden_markup", 0.0) + 1.0
        _merge(hits, _score_view(normalise(hidden), deadline, multiplier=HIDDEN_MULTIPLIER))
    invisible = count_invisible(content)
    if invisible:
        hits["hidden_markup"] = hits.get("hidden_markup", 0.0) + (0.5 if invisible >= 2 else 0.2)
    concealed = _hidden_texts(view)
    if concealed:
        if any(c.isalpha() for c in concealed):
            hits["hidden_markup"] = hits.get("hidden_markup", 0.0) + 0.3
        _merge(hits, _score_view(concealed, deadline, multiplier=HIDDEN_MULTIPLIER))
    for payload in _decoded_payloads(view):
        decoded = _score_view(normalise(payload), deadline, strong_only=True)
        if decoded:
            hits["encoded_instruction"] = max(hits.get("encoded_instruction", 0.0), 1.0)

    # Interactions: an imperative is ordinary in an e-mail, but not after the text has addressed the model,
    # and not when it acts on "the user" in the third person (the reader is the user's agent).
    # (The cheap conditions first: the imperative scan runs only when one of them holds.)
    to_ai = hits.get("addressed_to_ai", 0.0) >= 0.4 or hits.get("role_marker", 0.0) >= 0.3
    about_user = _search(_THE_USER, view, deadline) is not None
    if (to_ai or about_user) and _search(_IMPERATIVE, view, deadline):
        if to_ai:
            hits["imperative_to_ai"] = ADDRESSED_IMPERATIVE
        if about_user:
            hits["imperative_about_user"] = USER_IMPERATIVE

    score = round(sum(hits.values()), 3)
    directed_score = sum(w for code, w in hits.items() if code not in CONTEXTUAL)
    return InstructionVerdict(
        score >= THRESHOLD, tuple(sorted(hits)), score, directed=directed_score >= DIRECTED_THRESHOLD - 1e-9
    )


def warm_up() -> None:
    """Compile every rule and read its words now (~0.1 s), not on the first candidate."""
    _compiled()
    _prefilter()
    _IMPERATIVE.search("warm up")

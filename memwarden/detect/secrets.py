"""Secrets and credentials: detect-secrets' plugins run in memory, plus the formats and prose it misses.

detect-secrets is a file scanner; its `scan_line` helper mutates a process-wide settings singleton
(and clears caches on every call), and `analyze_line` may *verify* a secret by sending it to the
vendor's API when a verification filter is configured. So we instantiate its regex plugins once and
call `analyze_string` directly: pure, in memory, thread-safe, no network, no files.

Left out on purpose: the two high-entropy plugins (in ad-hoc "eager" mode they flag nearly every word
of prose) and `IPPublicDetector` (an IP address is PII here, reported by `pii.py`). In their place:
vendor formats detect-secrets lacks, "password is ..." prose, keyword-introduced tokens, and a
conservative entropy check for long random tokens.

Also ours, for what prose and pasted configuration carry without a vendor prefix: credentials inside a
URL (`postgres://admin:S3cretPass!@db...`), a login written as "user / password", a PIN or a pass
stated in prose ("the wifi pass is ...", "the PIN for my debit card is ..."), a bare 40-character cloud
secret key (AWS's secret access key has no prefix), and a wallet's BIP-39 seed phrase (12 to 24 words of
its wordlist, read from the `mnemonic` package; a valid checksum, or a wallet word nearby).

Every pattern is linear-time: each repetition is bounded, or its characters cannot also match what
follows it, so no input makes the regex engine backtrack.

Decisions (tested): UUIDs and bare hex strings (git SHAs, sha256/md5 digests, Mongo ObjectIds) are
identifiers, not secrets, unless a secret keyword introduces them ("api key: 3f78..."). Public keys
(ssh-ed25519 ..., BEGIN PUBLIC KEY / CERTIFICATE) are not secrets.

Results are codes only; no function here returns or raises with the matched text.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from memwarden.detect._prefilter import Prefilter, any_of, pattern_literals
from memwarden.detect._text import normalise, smuggled_tags

# detect-secrets plugin class -> our code. Codes are stable: the gate and audit events carry them.
_DS_PLUGINS: dict[str, str] = {
    "AWSKeyDetector": "aws_access_key",
    "ArtifactoryDetector": "artifactory_token",
    "AzureStorageKeyDetector": "azure_storage_key",
    "BasicAuthDetector": "basic_auth_credentials",
    "CloudantDetector": "cloudant_credentials",
    "DiscordBotTokenDetector": "discord_bot_token",
    "GitHubTokenDetector": "github_token",
    "GitLabTokenDetector": "gitlab_token",
    "IbmCloudIamDetector": "ibm_cloud_iam_key",
    "IbmCosHmacDetector": "ibm_cos_hmac_credentials",
    "JwtTokenDetector": "jwt",
    "KeywordDetector": "secret_keyword",
    "MailchimpDetector": "mailchimp_key",
    "NpmDetector": "npm_token",
    "OpenAIDetector": "openai_api_key",
    "PrivateKeyDetector": "private_key",
    "PypiTokenDetector": "pypi_token",
    "SendGridDetector": "sendgrid_api_key",
    "SlackDetector": "slack_token",
    "SoftlayerDetector": "softlayer_credentials",
    "SquareOAuthDetector": "square_oauth_secret",
    "StripeDetector": "stripe_key",
    "TelegramBotTokenDetector": "telegram_bot_token",
    "TwilioKeyDetector": "twilio_api_key",
}

_B = r"(?<![A-Za-z0-9_])"  # token start: not glued to a longer identifier
_E = r"(?![A-Za-z0-9_])"

_EXTRA: tuple[tuple[str, str], ...] = (
    ("github_token", rf"{_B}github_pat_[A-Za-z0-9_]{{22,255}}"),
    ("github_token", rf"{_B}gh[pousr]_[A-Za-z0-9]{{36,255}}{_E}"),
    ("openai_api_key", rf"{_B}sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{{20,}}"),
    ("openai_api_key", rf"{_B}sk-[A-Za-z0-9]{{32,}}{_E}"),
    ("anthropic_api_key", rf"{_B}sk-ant-(?:api|admin|oat|ort)\d{{2}}-[A-Za-z0-9_-]{{20,}}"),
    ("google_api_key", rf"{_B}AIza[0-9A-Za-z_-]{{35}}"),
    ("google_oauth_secret", rf"{_B}GOCSPX-[A-Za-z0-9_-]{{20,}}"),
    ("google_oauth_token", rf"{_B}ya29\.[0-9A-Za-z_-]{{20,}}"),
    ("gcp_service_account", r'"type"\s*:\s*"service_account"|"private_key_id"\s*:\s*"[a-f0-9]{40}"'),
    ("azure_client_secret", r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
    ("azure_sas_token", r"[?&]sig=[A-Za-z0-9%+/=]{30,}"),
    ("azure_connection_string", r"(?:SharedAccessKey|AccountKey)=[A-Za-z0-9+/=]{30,}"),
    ("stripe_key", rf"{_B}(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{{16,}}"),
    ("stripe_key", rf"{_B}whsec_[A-Za-z0-9+/=]{{24,}}"),
    ("slack_token", rf"{_B}xox[abposre]-[A-Za-z0-9-]{{10,}}"),
    ("slack_token", rf"{_B}xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+"),
    ("huggingface_token", rf"{_B}hf_[A-Za-z]{{30,}}{_E}"),
    ("npm_token", rf"{_B}npm_[A-Za-z0-9]{{36}}{_E}"),
    ("shopify_token", rf"{_B}shp(?:at|ss|ca|pa)_[a-fA-F0-9]{{32}}{_E}"),
    ("digitalocean_token", rf"{_B}do[por]_v1_[a-f0-9]{{64}}{_E}"),
    ("databricks_token", rf"{_B}dapi[a-f0-9]{{32}}(?:-\d)?{_E}"),
    ("vault_token", rf"{_B}hv[sbr]\.[A-Za-z0-9_-]{{24,}}"),
    ("groq_api_key", rf"{_B}gsk_[A-Za-z0-9]{{48,}}{_E}"),
    ("xai_api_key", rf"{_B}xai-[A-Za-z0-9]{{60,}}{_E}"),
    ("linear_api_key", rf"{_B}lin_api_[A-Za-z0-9]{{40}}{_E}"),
    ("notion_token", rf"{_B}(?:ntn|secret)_[A-Za-z0-9]{{43,46}}{_E}"),
    ("replicate_token", rf"{_B}r8_[A-Za-z0-9]{{37}}{_E}"),
    ("atlassian_token", rf"{_B}ATATT3[A-Za-z0-9_=-]{{100,}}"),
    ("postman_api_key", rf"{_B}PMAK-[a-f0-9]{{24}}-[a-f0-9]{{34}}{_E}"),
    ("sentry_token", rf"{_B}sntr[ysu]s?_[A-Za-z0-9+/=_-]{{40,}}"),
    ("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("bearer_token", r"\bBearer\s+[A-Za-z0-9._~+/=-]{20,}"),
    ("basic_auth_credentials", r"\bAuthorization:\s*Basic\s+[A-Za-z0-9+/=]{8,}"),
    ("password_in_text", r"(?:^|[\s;|&])(?:mysql|mysqldump|mariadb|mysqladmin)\b[^\n]*?\s-p(?![\s-])\S{3,}"),
    ("password_in_text", r"(?i)\b(?:user(?:name)?|login)\s+\S+\s+(?:pass|pw|pwd)\s+(?=\S*[\d\W])\S{4,}"),
    (
        "secret_keyword",
        r"(?i)\b(?:api[ _-]?key|access[ _-]?token|secret[ _-]?key|auth[ _-]?token|client[ _-]?secret)\s+"
        r"(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{16,}",
    ),
    ("secret_keyword", r"(?<![\w.-])(?i:key)\s*[:=]\s*(?=\S*\d)(?=\S*(?:[^\w\s]|[A-Z]\S*[a-z]|[a-z]\S*[A-Z]))\S{6,}"),
    (
        "access_code",
        r"(?i)\b(?:door|gate|garage|alarm|locker|safe|lock|entry|building|keypad|padlock)\s+(?:code|combination|pin)\b"
        r"[^\n]{0,16}?(?:\bis\b|:|=)\s*[\d#*-]{3,}",
    ),
    ("access_code", r"(?i)\bcombination\b[^\n]{0,12}?(?:\bis\b|:)\s*\d{1,3}(?:[- ]\d{1,3}){2,}"),
    (
        "url_credentials",
        r"(?i)\b[a-z][a-z0-9+.-]{1,30}://[^\s/?#@:]{1,128}:(?![^\s/?#@]*(?:\$\{|\{\{|<|\*{3}|xxx))"
        r"[^\s/?#@]{3,128}@[a-z0-9[]",
    ),
    (
        "password_in_text",
        r"(?i)\b(?:login|log-in|sign[- ]?in|credentials|creds|username and password)\b[^\n]{0,24}?"
        r"(?:\bis\b|\bare\b|:)\s*[\w.@+-]{2,64}\s*(?:/|\||,|\band\b|\bpassword\b|\bpw\b)\s*"
        r"(?=[^\s]{0,63}[\d\W_])[^\s\w]?[\w!@#$%^&*+=?~.-]{4,64}",
    ),
    (
        "password_in_text",
        r"(?i)\b(?:changed|set|reset|updated)\b[^\n]{0,30}?\b(?:password|passcode|passphrase|pass|pwd|pin)\s+to\s+"
        r"(?=[^\s]{0,63}[\d\W_])[^\s]{4,64}",
    ),
    (
        "password_in_text",
        r"(?i)\b(?:password|passcode|passphrase|pwd)\s*[\"'`](?=[^\"'`\n]{0,63}[\d\s!@#$%^&*])[^\"'`\n]{6,64}[\"'`]",
    ),
    (
        "card_pin",
        r"(?i)\b(?:pin|pin code|pin number)\b[^\n]{0,32}?(?:\bis\b|:|=|\bof\b)\s*\d{4,8}\b"
        r"|\b(?:card|visa|mastercard|amex|debit|credit|bank|atm|sim)\s+pin\s*(?::|=|#|\bis\b)?\s*\d{4,8}\b",
    ),
    (
        "access_code",
        r"(?i)\b(?:backup|recovery|2fa|two-factor|mfa|one-time)\s+codes?\b[^\n]{0,20}?(?:\bis\b|\bare\b|:)\s*(?=[\w-]*\d)[\w-]{4,}",
    ),
)

_PW_KW = r"pass(?:word|wd|phrase|code)?|pwd|pw|passwort|contrase[ñn]a|mot de passe|pin(?: code| number)?"
_KEY_KW = (
    r"api[ _-]?(?:key|token|secret)|access[ _-]?(?:key|token)|secret[ _-]?key|auth(?:entication)?[ _-]?token"
    r"|client[ _-]?secret|bearer token|token|secret"
)
_QUAL = (
    r"(?:\s+(?:for|to|of|on|at)\s+(?:the\s+|my\s+|our\s+|his\s+|her\s+|their\s+|your\s+)?[\w.@'-]+"
    r"(?:\s+(?:account|server|login|app|service|router|wifi|network|box|db|database|portal|site|vpn|card))?)?"
)
_ASSIGN = (
    r"(?:\s*(?::=|[:=])|\s+(?:has been (?:changed|set|reset|updated) to|(?:was |is )?(?:changed|set|reset|updated) to"
    r"|is now|is|was|will be|reads))\s*"
)
_PROSE = re.compile(
    rf"(?<![\w-])(?P<kw>{_PW_KW}|{_KEY_KW}){_QUAL}{_ASSIGN}(?P<q>[\"'`]?)(?P<v>[^\s\"'`]{{2,300}})",
    re.IGNORECASE,
)

_STOP = frozenset(
    """
    the a an not now no none null nil empty blank same different still also being too very set reset correct
    incorrect wrong right invalid valid weak strong secure insecure long short missing required optional needed
    necessary case sensitive in on at for to of with by from my your his her their our its this that it what which
    here there below above unknown unchanged hidden private public known good bad fine ok okay yes true false
    example something anything nothing easy hard simple complex new old mandatory temporary forgotten lost
    compromised shared default standard random unique usually always never probably just only like due about
    available unavailable active inactive disabled enabled locked unlocked up down over under ready pending where
    how why when who kept written given sent wrong sensitive secret confidential personal same-as different-from
    unset empty-string mine yours theirs ours same_as
    """.split()
)
_WEAK_SUFFIXES = ("ed", "ing", "ly", "able", "ible", "ful", "less", "ive", "ous")
_PLACEHOLDER = re.compile(r"^(?:x{3,}|\*{3,}|\.{3,}|#{3,}|-{3,}|_{3,}|\[redacted\]|redacted|changeme|todo|tbd)$", re.I)

_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_=-]{32,}(?![A-Za-z0-9+/_=-])")
_WORDLIKE = re.compile(r"[A-Z]?[a-z]{4,}")
_HEX_OR_UUID = re.compile(r"^(?:[0-9a-fA-F]+|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})$")
_PUBLIC_BLOCK = re.compile(
    r"-----BEGIN (?:PUBLIC KEY|RSA PUBLIC KEY|CERTIFICATE|CERTIFICATE REQUEST|PGP PUBLIC KEY BLOCK)-----"
    r".*?-----END [A-Z ]+-----",
    re.DOTALL,
)
_PUBLIC_SSH = re.compile(
    r"(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com)\s+[A-Za-z0-9+/=]+"
)
_PUBLIC_PREFIXES = ("pk_live_", "pk_test_", "pub_", "pk-")
"""Publishable / public keys (Stripe and others): meant to ship to browsers, not secrets."""
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")


@lru_cache(maxsize=1)
def _extra_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((code, re.compile(p)) for code, p in _EXTRA)


_PLUGIN_MODULES = (
    "artifactory",
    "aws",
    "azure_storage_key",
    "basic_auth",
    "cloudant",
    "discord",
    "github_token",
    "gitlab_token",
    "ibm_cloud_iam",
    "ibm_cos_hmac",
    "jwt",
    "keyword",
    "mailchimp",
    "npm",
    "openai",
    "private_key",
    "pypi_token",
    "sendgrid",
    "slack",
    "softlayer",
    "square_oauth",
    "stripe",
    "telegram_token",
    "twilio",
)
"""detect-secrets' pattern plugins we run (none that call out to verify a found key)."""


@lru_cache(maxsize=1)
def _plugins() -> tuple[tuple[str, Any], ...]:
    """detect-secrets plugin instances, built once. Imported lazily: the worker pays for it at warm-up."""
    modules = tuple(importlib.import_module(f"detect_secrets.plugins.{name}") for name in _PLUGIN_MODULES)
    found = []
    for module in modules:
        for name, code in _DS_PLUGINS.items():
            cls = getattr(module, name, None)
            if cls is not None:
                found.append((code, cls()))
    return tuple(found)


def shannon_entropy(value: str) -> float:
    """Bits per character; random base62 tokens of 32+ chars score ~4.6+, English identifiers ~3.5-4.1."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(token: str) -> bool:
    """A long token that is a credential rather than an identifier, a path or a hex digest."""
    core = token.strip("=")
    if _HEX_OR_UUID.match(core) or core.startswith(_PUBLIC_PREFIXES):
        return False
    has_upper = any(c.isupper() for c in core)
    has_lower = any(c.islower() for c in core)
    digits = sum(c.isdigit() for c in core)
    if not (has_upper and has_lower and digits >= 2):
        return False
    if core.count("/") >= 3 and all(seg[:1].isalpha() for seg in core.split("/") if seg):
        return False  # a path, not base64
    wordlike = sum(len(m) for m in _WORDLIKE.findall(core))
    if wordlike > 0.5 * len(core):
        return False  # CamelCaseIdentifiersLikeThis
    return shannon_entropy(core) >= 4.2


def _prose_value_is_secret(kw: str, quoted: bool, value: str) -> bool:
    """'my password is hunter2' yes; 'my password is expired' / 'the token is valid' no."""
    from detect_secrets.filters.heuristic import is_sequential_string, is_templated_secret

    value = value.rstrip(".,;:!?)]}")
    if not value or is_templated_secret(value) or value.startswith("$") or _PLACEHOLDER.match(value):
        return False
    if not any(c.isalnum() for c in value):
        return False  # ******** and friends
    kw = kw.lower()
    lower = value.lower()
    if kw.startswith("pin"):
        return value.isdigit() and 4 <= len(value) <= 8
    if kw == "pass":
        # a bare "pass" is as often a ticket as a password: only a value shaped like one counts
        return len(value) >= 6 and has_password_shape(value)
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if not re.match(_PW_KW + r"$", kw, re.IGNORECASE):
        # key / token / secret family: a real value is long and mixes letters and digits
        return len(value) >= 12 and has_digit and has_alpha and not is_sequential_string(value)
    if lower in _STOP:
        return False
    if "(" in value or value.endswith("()"):
        return False  # password = get_password()
    if quoted or has_digit or not value.isalpha() or (value[1:] != value[1:].lower()):
        return len(value) >= 3
    if len(value) < 4 or lower.endswith(_WEAK_SUFFIXES):
        return False
    return True


def _scan_prose(text: str) -> set[str]:
    from detect_secrets.filters.heuristic import is_indirect_reference

    found: set[str] = set()
    for m in _PROSE.finditer(text):
        kw = m.group("kw")
        if _prose_value_is_secret(kw, bool(m.group("q")), m.group("v")):
            line_start = text.rfind("\n", 0, m.start()) + 1
            line_end = text.find("\n", m.end())
            line = text[line_start : line_end if line_end != -1 else len(text)]
            if is_indirect_reference(line):
                continue
            family_pw = re.fullmatch(_PW_KW, kw, re.IGNORECASE) is not None
            found.add("password_in_text" if family_pw else "secret_keyword")
    return found


def _scan_entropy(text: str) -> set[str]:
    text = _PUBLIC_BLOCK.sub(" ", text)
    text = _PUBLIC_SSH.sub(" ", text)
    text = _DATA_URI.sub(" ", text)
    for m in _TOKEN.finditer(text):
        if _looks_random(m.group(0)):
            return {"high_entropy_string"}
    return set()


def _plugin_patterns(plugin: Any) -> list[Any] | None:
    """The patterns a plugin's `analyze_string` searches, when we know it searches only those (then a line
    holding none of their words cannot give a finding); None otherwise."""
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector

    method = type(plugin).analyze_string
    if isinstance(plugin, RegexBasedDetector) and method in (
        RegexBasedDetector.analyze_string,
        JwtTokenDetector.analyze_string,  # the base's matches, filtered
    ):
        return list(plugin.denylist)
    if isinstance(plugin, keyword.KeywordDetector) and method is keyword.KeywordDetector.analyze_string:
        return list(keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)  # what it searches when given no file type
    return None


@lru_cache(maxsize=1)
def _plugin_prefilter() -> Prefilter:
    """Per plugin, the words one of its patterns needs (`_prefilter`): a text without them skips the plugin."""
    words = []
    for _, plugin in _plugins():
        patterns = _plugin_patterns(plugin)
        words.append(None if patterns is None else any_of(pattern_literals(p) for p in patterns))
    return Prefilter(words)


@lru_cache(maxsize=1)
def _extra_prefilter() -> Prefilter:
    """The words each of our own patterns needs, and (last) the prose pattern's."""
    return Prefilter([*(pattern_literals(p) for _, p in _extra_patterns()), pattern_literals(_PROSE)])


def _scan_plugins(text: str) -> set[str]:
    from detect_secrets.filters.heuristic import is_potential_uuid, is_sequential_string, is_templated_secret

    found: set[str] = set()
    possible = _plugin_prefilter().possible(text)
    plugins = [plugin for plugin, may_match in zip(_plugins(), possible, strict=True) if may_match]
    if not plugins:
        return found
    for line in dict.fromkeys(text.splitlines()):  # each distinct line once: a finding is per text, not per line
        if not line.strip():
            continue
        for code, plugin in plugins:
            if code in found or (code == "npm_token" and "_authToken" not in line):
                # detect-secrets' npm pattern backtracks quadratically on runs of "/"; it needs the key
                continue
            for value in plugin.analyze_string(line):
                if code == "secret_keyword" and (
                    is_templated_secret(value) or is_potential_uuid(value) or is_sequential_string(value)
                ):
                    continue
                found.add(code)
                break
    return found


def has_password_shape(value: str) -> bool:
    """Letters with digits or symbols ("Tr0ub4dor&3", "Summer2024!"): what people choose as a password."""
    letters = any(c.isalpha() for c in value)
    others = any(c.isdigit() for c in value) or any(not c.isalnum() for c in value)
    return letters and others


_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
"""AWS's secret access key: 40 characters of base64, no prefix; found bare it is told from a SHA-1
(40 hex digits, one case) and from words by its mix of cases and digits and its entropy."""


def _scan_cloud_secret(text: str) -> set[str]:
    for m in _AWS_SECRET.finditer(text):
        value = m.group(0)
        if _HEX_OR_UUID.match(value):
            continue
        upper = sum(c.isupper() for c in value)
        lower = sum(c.islower() for c in value)
        digits = sum(c.isdigit() for c in value)
        if (
            upper >= 4
            and lower >= 4
            and (digits >= 1 or "/" in value or "+" in value)
            and shannon_entropy(value) >= 4.0
        ):
            wordlike = sum(len(w) for w in _WORDLIKE.findall(value))
            if wordlike <= 0.5 * len(value):
                return {"cloud_secret_key"}
    return set()


_SEED_WORD = re.compile(r"(?<![a-z])[a-z]{3,8}(?![a-z])")
"""Words of a wordlist's length (BIP-39 words have 3 to 8 letters): a longer or shorter word breaks a run
all the same, because it is left in the gap to the next word, which is then no separator."""
_SEED_SEPARATOR = re.compile(r"[\s,;|\-]*(?:\d{1,2}[.):]?[\s,;|\-]*)?")
_SEED_LENGTHS = (24, 21, 18, 15, 12)
_WALLET_WORDS = re.compile(
    r"(?i)\b(?:seed|mnemonic|recovery|backup|secret|wallet|metamask|ledger|trezor|phrase|bip-?39|crypto|bitcoin|ethereum)\b"
)


@lru_cache(maxsize=1)
def _bip39() -> dict[str, int]:
    """The BIP-39 English wordlist from the `mnemonic` package (loaded on first use), word -> its index."""
    from mnemonic import Mnemonic

    return {word: i for i, word in enumerate(Mnemonic("english").wordlist)}


def _bip39_checksum_ok(indices: Sequence[int]) -> bool:
    """BIP-39's checksum over 12 to 24 word indices: the last len/3 bits are the leading bits of the entropy's
    sha256. Ours rather than `Mnemonic.check`, which looks every word up in a list: a long run of wordlist
    words would cost seconds."""
    checksum_bits = len(indices) // 3
    value = 0
    for index in indices:
        value = value << 11 | index
    entropy = (value >> checksum_bits).to_bytes((len(indices) * 11 - checksum_bits) // 8, "big")
    return hashlib.sha256(entropy).digest()[0] >> (8 - checksum_bits) == value & ((1 << checksum_bits) - 1)


def _scan_seed_phrase(text: str) -> set[str]:
    """12-24 consecutive BIP-39 words (numbered or not): a wallet seed if the checksum holds, or if a
    wallet word is in the text (a seed copied with a typo is still the wallet's key)."""
    words = _bip39()
    lowered = text.lower()
    run: list[str] = []
    pos = 0
    runs: list[list[str]] = []
    for m in _SEED_WORD.finditer(lowered):
        gap = lowered[pos : m.start()]
        pos = m.end()
        joined = not run or _SEED_SEPARATOR.fullmatch(gap) is not None
        if m.group(0) in words and joined:
            run.append(m.group(0))
            continue
        if len(run) >= 12:
            runs.append(run)
        run = [m.group(0)] if m.group(0) in words else []
    if len(run) >= 12:
        runs.append(run)
    if not runs:
        return set()
    if _WALLET_WORDS.search(text):
        return {"seed_phrase"}
    checked: set[tuple[int, ...]] = set()  # a run of one repeated word is one phrase, not hundreds
    for run in runs:
        indices = [words[word] for word in run]
        for length in _SEED_LENGTHS:
            for start in range(len(indices) - length + 1):
                phrase = tuple(indices[start : start + length])
                if phrase in checked:
                    continue
                checked.add(phrase)
                if _bip39_checksum_ok(phrase):
                    return {"seed_phrase"}
    return set()


def find_secrets(content: str) -> list[str]:
    """Codes of every kind of secret in `content`, sorted; [] if none. Never returns the secret itself."""
    text = normalise(content)
    hidden = smuggled_tags(content)
    if hidden:
        text = f"{text}\n{hidden}"
    found = _scan_plugins(text)
    *extra, prose = _extra_prefilter().possible(text)
    for (code, pattern), possible in zip(_extra_patterns(), extra, strict=True):
        if possible and code not in found and pattern.search(text):
            found.add(code)
    if prose:
        found |= _scan_prose(text)
    found |= _scan_cloud_secret(text)
    found |= _scan_seed_phrase(text)
    if not found:
        found |= _scan_entropy(text)
    return sorted(found)


def warm_up() -> None:
    """Build the plugin instances and compile every pattern now, not on the first candidate."""
    _plugins()
    _extra_patterns()
    _plugin_prefilter()
    _extra_prefilter()
    _bip39()
    find_secrets("warm up: password is x9y8z7 and ghp_" + "a1" * 18)

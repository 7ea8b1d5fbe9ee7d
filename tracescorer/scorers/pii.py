"""Personal-data detectors and :class:`RedactPII`, the redacting judge input processor.

A :class:`Detector` finds spans of one kind of personal data in a text. :class:`RedactPII`
runs a list of detectors over each message and replaces what they find with
``[REDACTED_<KIND>]``. Detectors run on the original text in list order; a span overlapping
one an earlier detector claimed is skipped, so put the most specific detectors first (an API
key or card number is also a run of digits a phone detector would take).

Validation is done with real checks, not patterns alone: Luhn for cards, ISO 13616 mod-97 for
IBANs, :mod:`ipaddress` for IP addresses and Google's libphonenumber (the ``phonenumbers``
package, imported on first use) for phone numbers.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Span = tuple[int, int]


@runtime_checkable
class Detector(Protocol):
    """Finds one kind of personal data.

    ``kind`` names it (the placeholder is ``[REDACTED_<KIND>]``); ``find(text)`` returns the
    ``(start, end)`` spans to redact. Called on the event loop for every judge message: keep it
    fast and free of I/O.
    """

    @property
    def kind(self) -> str: ...

    def find(self, text: str) -> Iterable[Span]: ...


@dataclass(frozen=True, kw_only=True)
class RegexDetector:
    """Spans of ``pattern`` (its group ``group``), kept when ``check(matched text)`` is true."""

    kind: str
    pattern: re.Pattern[str]
    group: int = 0
    check: Any = None  # Callable[[str], bool] | None (Any keeps the dataclass hashable/frozen)

    def find(self, text: str) -> Iterator[Span]:
        for match in self.pattern.finditer(text):
            if match.group(self.group) is None:
                continue
            if self.check is None or self.check(match.group(self.group)):
                yield match.span(self.group)


# -- checks ---------------------------------------------------------------------------------------
def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a digit string (card numbers)."""
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_ok(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and luhn_ok(digits)


def iban_ok(text: str) -> bool:
    """ISO 13616: 15-34 characters, country code, check digits, mod 97 of the rotated number is 1."""
    iban = re.sub(r"\s", "", text).upper()
    if not 15 <= len(iban) <= 34 or not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]+", iban):
        return False
    rotated = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in rotated)) % 97 == 1


def _ip_ok(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class IbanDetector:
    """IBANs, with or without the customary spaces every four characters, checksum-validated."""

    kind = "iban"
    _CANDIDATE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?:[ ]?[A-Za-z0-9]){11,30}(?![A-Za-z0-9])")

    def find(self, text: str) -> Iterator[Span]:
        for match in self._CANDIDATE.finditer(text):
            # The candidate may run into a following word: try the longest valid prefix that
            # ends on a group boundary.
            start, value = match.start(), match.group(0)
            ends = [m.start() for m in re.finditer(" ", value)] + [len(value)]
            for end in reversed(ends):
                if iban_ok(value[:end]):
                    yield (start, start + end)
                    break


class IPv6Detector:
    """IPv6 addresses in every textual form (RFC 4291 / 5952): full, ``::``-compressed,
    IPv4-embedded (``::ffff:192.0.2.1``) and with a zone id (``fe80::1%eth0``), validated by
    :mod:`ipaddress`. Times (``12:30:45``) and MAC addresses are not addresses and are left."""

    kind = "ip"
    _CANDIDATE = re.compile(
        r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4})"
        r"(?:%[A-Za-z0-9_.\-]+)?(?![\w:])"
    )

    def find(self, text: str) -> Iterator[Span]:
        for match in self._CANDIDATE.finditer(text):
            if ":" in match.group(0) and _ip_ok(match.group(0)):
                yield match.span()


@dataclass(frozen=True, kw_only=True)
class PhoneDetector:
    """Phone numbers found by libphonenumber.

    International numbers (``+44 7700 900123``, ``0044 ...``) are recognised from any country;
    national numbers (``07700 900123``, ``(415) 555-0132``) are read as numbers of each region in
    ``regions``. A match is redacted when libphonenumber says it is a valid number, or a
    *possible* one written like a phone number (10+ digits starting with ``+``, ``(`` or a
    trunk ``0``), so numbers in reserved ranges (films, documentation) are caught too while
    order numbers, dates and versions are left alone.
    """

    regions: Sequence[str] = ("US", "GB")
    kind: str = field(default="phone", init=False)

    def find(self, text: str) -> Iterator[Span]:
        import phonenumbers

        seen: set[Span] = set()
        for region in self.regions:
            matcher = phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.POSSIBLE)
            for match in matcher:
                span = (match.start, match.end)
                if span not in seen and self._accept(phonenumbers, match, region):
                    seen.add(span)
                    yield span

    @staticmethod
    def _accept(phonenumbers: Any, match: Any, region: str) -> bool:
        raw: str = match.raw_string.strip()
        try:  # the matcher does not say how the country was found: parse again, keeping it
            source = phonenumbers.parse(raw, region, keep_raw_input=True).country_code_source
        except phonenumbers.NumberParseException:
            return False
        if source == phonenumbers.CountryCodeSource.FROM_DEFAULT_COUNTRY:
            # A national number is written with its trunk prefix where the region has one
            # (GB "07700 ...", not "7700 ..."): without it, it is most likely another number.
            # NANP's "1" is optional in writing, so it is not required.
            metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
            prefix = getattr(metadata, "national_prefix", None) or ""
            digits = "".join(ch for ch in raw if ch.isdigit())
            if prefix and prefix != "1" and not digits.startswith(prefix):
                return False
        if phonenumbers.is_valid_number(match.number):
            return True
        return sum(ch.isdigit() for ch in raw) >= 10 and raw[:1] in ("+", "(", "0")


_MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DATE = (
    rf"(?:\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}[/.\-]\d{{1,2}}[/.\-]\d{{2,4}}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+\d{{4}}"
    rf"|{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}})"
)
_STREET_TYPES = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|"
    r"Way|Place|Pl|Terrace|Terr|Close|Crescent|Cres|Square|Sq|Parkway|Pkwy|"
    r"Highway|Hwy|Circle|Cir|Row|Mews|Gardens|Gdns|Walk|Hill|Grove)"
)

API_KEY = RegexDetector(
    kind="api_key",
    pattern=re.compile(
        r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*"
        r"|\b(?:sk|pk|rk)-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}"
        r"|\bAKIA[0-9A-Z]{16}\b"
        r"|\bgh[pousr]_[A-Za-z0-9]{30,}\b"
        r"|\bxox[abpr]-[A-Za-z0-9-]{10,}"
        r"|\bAIza[0-9A-Za-z_\-]{35}\b"
    ),
)
EMAIL = RegexDetector(kind="email", pattern=re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b"))
CARD = RegexDetector(kind="card", pattern=re.compile(r"\b(?:\d[ \-]?){12,18}\d\b"), check=_card_ok)
# SSA rules: area not 000, 666 or 9xx; group not 00; serial not 0000.
SSN = RegexDetector(kind="ssn", pattern=re.compile(r"\b(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}\b"))
# Nine bare digits only right after the word SSN / social security: else any ID would match.
SSN_UNFORMATTED = RegexDetector(
    kind="ssn",
    group=1,
    pattern=re.compile(
        r"(?i:\b(?:ssn|social\s+security(?:\s+number|\s+no\.?)?)\b)[\s:#]*(?:is\s+)?"
        r"((?!000|666|9\d\d)\d{3}(?!00)\d{2}(?!0000)\d{4})\b"
    ),
)
IPV4 = RegexDetector(
    kind="ip",
    pattern=re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.]*\d)"),
    check=_ip_ok,
)
DATE_OF_BIRTH = RegexDetector(
    kind="date_of_birth",
    group=1,
    pattern=re.compile(
        rf"(?i:\b(?:born(?:\s+on)?|d\.?o\.?b\.?|date\s+of\s+birth|birth\s*date|birthday)\b)"
        rf"[\s:,\-]*(?:is\s+|on\s+)?({_DATE})"
    ),
)
PASSPORT = RegexDetector(
    kind="passport",
    group=1,
    pattern=re.compile(
        r"(?i:\bpassport(?:\s+(?:no\.?|number|num\.?|#))?\b)[\s:#.]*(?:is\s+)?"
        r"((?=[A-Z0-9]*\d)[A-Z0-9]{6,9})\b"
    ),
)
ADDRESS = RegexDetector(
    kind="address",
    pattern=re.compile(
        # "221B Baker Street", "1600 Pennsylvania Ave NW, Apt 4", plus UK postcodes ("SW1A 1AA")
        rf"\b\d{{1,6}}[A-Za-z]?\s+(?:[A-Z][A-Za-z'\-]*\.?\s+){{1,4}}{_STREET_TYPES}\b\.?"
        r"(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\b)?(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Flat)\.?\s*#?\w+)?"
        r"|\b(?:[A-Z]{1,2}\d[A-Z\d]?|GIR)\s?\d[ABD-HJLNP-UW-Z]{2}\b"
    ),
)


def default_detectors() -> tuple[Detector, ...]:
    """The detectors :class:`RedactPII` uses unless given others, most specific first."""
    return (
        API_KEY,
        EMAIL,
        IbanDetector(),
        CARD,
        SSN,
        SSN_UNFORMATTED,
        IPv6Detector(),
        IPV4,
        DATE_OF_BIRTH,
        PASSPORT,
        PhoneDetector(),
        ADDRESS,
    )


PII_KINDS: tuple[str, ...] = tuple(dict.fromkeys(d.kind for d in default_detectors()))
"""The kinds the default detectors find."""


def preload() -> None:
    """Import ``phonenumbers`` and load all its region metadata now (it loads lazily, region by
    region, on first use otherwise). Safe to call from a worker thread; idempotent."""
    import phonenumbers

    phonenumbers.PhoneMetadata.load_all()


@dataclass(frozen=True, kw_only=True)
class RedactPII:
    """Input processor replacing personal data in the judge's messages with placeholders.

    Args:
        detectors: the :class:`Detector` list (default :func:`default_detectors`: API keys and
            bearer tokens, emails, IBANs, card numbers, US SSNs, IPv6 and IPv4 addresses, dates
            of birth, passport numbers, phone numbers, street addresses and UK postcodes). Add
            your own: ``RedactPII(detectors=(*default_detectors(), MyDetector()))``.
        kinds: keep only the detectors of these kinds (``None``: all of them).

    Each finding becomes ``[REDACTED_<KIND>]``. Works on string contents and on
    ``{"type": "text"}`` content parts; the judge records what was redacted, by kind, in
    ``JudgeCall.redactions``.
    """

    detectors: Sequence[Detector] = field(default_factory=default_detectors)
    kinds: Sequence[str] | None = None

    def __post_init__(self) -> None:
        for detector in self.detectors:
            if not isinstance(detector, Detector):
                raise TypeError(f"{detector!r} is not a Detector (needs .kind and .find(text))")
        if self.kinds is not None:
            known = {d.kind for d in self.detectors}
            unknown = set(self.kinds) - known
            if unknown:
                raise ValueError(f"unknown PII kinds {sorted(unknown)}; known: {sorted(known)}")
            object.__setattr__(self, "detectors", tuple(d for d in self.detectors if d.kind in self.kinds))

    def redact(self, text: str) -> str:
        """``text`` with every configured kind of personal data replaced."""
        return self.redact_counting(text)[0]

    def redact_counting(self, text: str) -> tuple[str, dict[str, int]]:
        """``text`` redacted, and how many items of each kind were replaced."""
        taken: list[tuple[int, int, str]] = []  # sorted, non-overlapping
        for detector in self.detectors:
            for start, end in detector.find(text):
                i = bisect.bisect_left(taken, (start, end))
                if (
                    start < end
                    and not (i > 0 and taken[i - 1][1] > start)
                    and not (i < len(taken) and taken[i][0] < end)
                ):
                    taken.insert(i, (start, end, detector.kind))
        if not taken:
            return text, {}
        counts: dict[str, int] = {}
        out: list[str] = []
        cursor = 0
        for start, end, kind in taken:
            out.append(text[cursor:start])
            out.append(f"[REDACTED_{kind.upper()}]")
            counts[kind] = counts.get(kind, 0) + 1
            cursor = end
        out.append(text[cursor:])
        return "".join(out), counts

    def redact_messages(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """The messages redacted (string contents and text parts), with counts by kind."""
        counts: dict[str, int] = {}

        def one(text: str) -> str:
            redacted, found = self.redact_counting(text)
            for kind, n in found.items():
                counts[kind] = counts.get(kind, 0) + n
            return redacted

        out: list[dict[str, Any]] = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                message = {**message, "content": one(content)}
            elif isinstance(content, list):
                message = {
                    **message,
                    "content": [
                        {**p, "text": one(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
                        for p in content
                    ],
                }
            out.append(message)
        return out, counts

    def process_input(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.redact_messages(messages)[0]

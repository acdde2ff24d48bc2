"""Text cut into what XTTS speaks at once, the one splitter of the product (synthesize, the Test tab, the CLI's
`speak` and the speech server): paragraphs (blank lines), their sentences (`split_sentences`: Latin, CJK, Ethiopic,
Arabic and Devanagari ends), and a sentence over the language's character limit (utils.text.languages.char_limit)
cut at its clause marks, then between words, then, for a word longer than the limit or a script written without
spaces, every `limit` characters. The text of each piece is the text as written (nothing is added or dropped but the
spaces around it), and each piece says what follows it (`Piece.after`), so speech can pause as the punctuation does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# What follows a piece, from the longest pause to none (utils.model.long_text.PAUSE_SECONDS gives each its pause).
PARAGRAPH = "paragraph"  # a blank line
SENTENCE = "sentence"  # the end of a sentence (. ! ? and the other scripts' ends)
CLAUSE = "clause"  # a clause mark inside a sentence cut for being too long (, ; : and their other forms)
WORD = "word"  # a space inside a sentence cut with no clause mark near enough
NO_SPACE = "no space"  # a cut inside a run of characters without a space (a huge word, CJK text)
END = "end"  # the end of the text
BREAKS = (PARAGRAPH, SENTENCE, CLAUSE, WORD, NO_SPACE, END)

# Full stops that end a sentence wherever they are (no space follows in CJK text):
# CJK 。！？． ; Ethiopic ። ፧ ፨ (፣ is a comma) ; Arabic ؟ ; Urdu ۔ ; Devanagari । ॥
ENDS_ALWAYS = "。！？．።፧፨؟۔।॥"
# Latin-style ends only count before whitespace or the end of the text (so 3.5, a.m.x do not).
ENDS_LATIN = ".!?…"
ENDS = ENDS_ALWAYS + ENDS_LATIN
# Closing quotes and brackets stay with the sentence they close.
CLOSERS = "\"'”’»)]}」』）》〉›"
OPENERS = "\"'“‘«([{「『（《〈‹¿¡"
# Tokens (lower case, without their final ".") after which a "." does not end a sentence.
ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "e.g",
        "i.e",
        "cf",
        "fig",
        "approx",
        "dept",
        "gen",
        "gov",
        "lt",
        "col",
        "sgt",
        "capt",
        "rev",
        "hon",
        "mt",
    }
)
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# A clause mark: a Latin , ; : only before a space or the end (3,5 and 10:30 stay whole); the Ethiopic, Arabic and
# CJK ones anywhere (CJK text has no spaces).
_CLAUSE_BREAK = re.compile(r"(?:[,;:](?=\s|$)|[፣፤،、，；])\s*")
_WORD = re.compile(r"\S+\s*")


def is_abbreviation(token: str) -> bool:
    return token.strip(OPENERS).rstrip(".").lower() in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping each end mark (and closing quotes) with its sentence.

    Ends: ``. ! ? …`` (Latin: only before whitespace or the end, and ``.`` not after an
    abbreviation such as Mr. / Dr. / e.g., so decimals like 3.5 stay whole), and anywhere:
    ``。 ！ ？ ．`` (CJK), ``። ፧ ፨`` (Ethiopic), ``؟ ۔`` (Arabic/Urdu), ``। ॥`` (Devanagari).
    ``;``, ``:``, ``,`` and Ethiopic ``፣`` are not ends. Empty pieces are dropped.
    """
    out: list[str] = []
    start = i = 0
    n = len(text)
    while i < n:
        if text[i] not in ENDS:
            i += 1
            continue
        j = i + 1
        while j < n and (text[j] in ENDS or text[j] in CLOSERS):  # "?!", "...", '."'
            j += 1
        run = text[i:j]
        if any(c in ENDS_ALWAYS for c in run):
            is_end = True
        elif j < n and not text[j].isspace():
            is_end = False  # 3.5, example.com, e.g.x
        elif run.rstrip(CLOSERS) == ".":
            before = text[start:i].split()
            is_end = not (before and is_abbreviation(before[-1]))
        else:
            is_end = True
        if is_end:
            piece = text[start:j].strip()
            if piece:
                out.append(piece)
            start = j
        i = j
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _spans(text: str, pattern: re.Pattern[str]) -> list[str]:
    """`text` cut after each match of `pattern` (the match stays with the part before it); nothing is lost."""
    parts, start = [], 0
    for match in pattern.finditer(text):
        if match.end() > start:
            parts.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


def _packed(parts: list[str], limit: int) -> list[str]:
    """Consecutive parts joined as written into pieces of at most `limit` characters (spaces at the ends not
    counted); a longer part stays alone."""
    pieces: list[str] = []
    for part in parts:
        if pieces and len((pieces[-1] + part).strip()) <= limit:
            pieces[-1] += part
        else:
            pieces.append(part)
    return pieces


def _cut(sentence: str, limit: int) -> list[tuple[str, str]]:
    """(piece, what follows it: CLAUSE, WORD or NO_SPACE) of a sentence, each piece at most `limit` characters."""
    out: list[tuple[str, str]] = []
    for clause in _packed(_spans(sentence, _CLAUSE_BREAK), limit):
        if len(clause.strip()) <= limit:
            out.append((clause, CLAUSE))
            continue
        for words in _packed(_WORD.findall(clause), limit):
            word = words.strip()
            chunks = [word[i : i + limit] for i in range(0, len(word), limit)] or [""]
            out += [(chunk, NO_SPACE) for chunk in chunks[:-1]] + [(chunks[-1], WORD)]
        out[-1] = (out[-1][0], CLAUSE)  # the clause's last words end where the clause does
    return [(piece.strip(), after) for piece, after in out if piece.strip()]


def sentence_pieces(sentence: str, limit: int) -> list[str]:
    """A sentence cut to pieces of at most `limit` characters: at clause marks (, ; : and their Ethiopic, Arabic and
    CJK forms), then at spaces, then (a word longer than the limit, or text without spaces) every `limit`."""
    sentence = sentence.strip()
    if len(sentence) <= limit:
        return [sentence] if sentence else []
    return [piece for piece, _ in _cut(sentence, limit)]


@dataclass(frozen=True)
class Piece:
    """A piece of text to speak in one generation: its text as written, the sentence it belongs to (from 1), its
    place in that sentence (`part` of `parts`; one part: the sentence is spoken whole), and what follows it
    (`after`: one of BREAKS)."""

    text: str
    sentence: int
    part: int
    parts: int
    after: str

    @property
    def cut(self) -> bool:
        """Whether its sentence was over the character limit and cut."""
        return self.parts > 1


def speech_pieces(text: str, limit: int) -> list[Piece]:
    """The pieces of `text` to speak, in order (see the module docstring); none for text without a character to
    say."""
    if limit < 1:
        raise ValueError(f"the character limit must be 1 or more (got {limit})")
    pieces: list[Piece] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        for sentence in split_sentences(paragraph):
            number = pieces[-1].sentence + 1 if pieces else 1
            cut = _cut(sentence, limit) if len(sentence) > limit else [(sentence, SENTENCE)]
            for part, (piece, after) in enumerate(cut, 1):
                after = SENTENCE if part == len(cut) else after
                pieces.append(Piece(piece, number, part, len(cut), after))
        if pieces and pieces[-1].after == SENTENCE:  # a paragraph's last sentence (an empty one adds none)
            pieces[-1] = replace(pieces[-1], after=PARAGRAPH)
    if pieces:
        pieces[-1] = replace(pieces[-1], after=END)
    return pieces

"""Probe texts: what a fine-tuned voice is asked to say, beside the held-out sentences, to catch babbling.

A voice that has weakened its stop token babbles on after the text, above all on short texts and after a
question or an exclamation; a long text near the per-language character limit shows skipped or repeated
words. So every scored evaluation speaks four probes (`PROBE_KINDS`):

- `short`: one to three words ("Thank you.");
- `question`: a sentence ending in a question mark;
- `exclamation`: a sentence ending in an exclamation mark;
- `long`: one sentence of 75-95% of the language's character limit (utils.text.languages.char_limit).

Each language XTTS speaks, and Amharic, has its own list (`PROBES`). For any other language the probes are built
from the dataset's eval texts with those endings (`probes_from_texts`), so a new language still gets its short,
question and exclamation probes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from utils.text.languages import canonical_language, char_limit

PROBE_KINDS = ("short", "question", "exclamation", "long")
# The long probe fills this share of the language's character limit, at most.
LONG_SHARE = 0.95
SHORT_WORDS = 3


@dataclass(frozen=True)
class Probe:
    kind: str  # one of PROBE_KINDS
    text: str


# language -> (short, question, exclamation, long)
PROBES: dict[str, tuple[str, str, str, str]] = {
    "en": (
        "Thank you.",
        "Are you coming with us tonight?",
        "What a wonderful surprise!",
        "When the morning train finally reached the little station, the travellers gathered their bags and coats, "
        "greeted the friends who had waited for them in the cold, and walked together along the river to the old "
        "house on the hill.",
    ),
    "es": (
        "Sí, claro.",
        "¿Vienes con nosotros esta noche?",
        "¡Qué sorpresa tan maravillosa!",
        "Cuando el tren de la mañana llegó a la pequeña estación, los viajeros recogieron sus maletas y abrigos, "
        "saludaron a los amigos que los esperaban en el frío y caminaron juntos junto al río hasta la vieja casa de "
        "la colina.",
    ),
    "fr": (
        "D'accord.",
        "Tu viens avec nous ce soir ?",
        "Quelle merveilleuse surprise !",
        "Quand le train du matin arriva enfin à la petite gare, les voyageurs prirent leurs sacs et leurs manteaux, "
        "saluèrent les amis qui les attendaient dans le froid et marchèrent ensemble le long de la rivière jusqu'à "
        "la vieille maison sur la colline.",
    ),
    "de": (
        "Alles klar.",
        "Kommst du heute Abend mit uns?",
        "Was für eine wunderbare Überraschung!",
        "Als der Morgenzug endlich den kleinen Bahnhof erreichte, nahmen die Reisenden ihre Taschen und Mäntel, "
        "begrüßten die Freunde, die in der Kälte auf sie gewartet hatten, und gingen gemeinsam am Fluss entlang zum "
        "alten Haus auf dem Hügel.",
    ),
    "it": (
        "Va bene.",
        "Vieni con noi stasera?",
        "Che sorpresa meravigliosa!",
        "Quando il treno del mattino arrivò alla piccola stazione, i viaggiatori presero borse e cappotti, "
        "salutarono gli amici che li aspettavano e camminarono insieme lungo il fiume fino alla vecchia casa.",
    ),
    "pt": (
        "Tudo bem.",
        "Você vem conosco esta noite?",
        "Que surpresa maravilhosa!",
        "Quando o trem da manhã chegou à pequena estação, os viajantes pegaram as malas e os casacos, "
        "cumprimentaram os amigos que os esperavam no frio e caminharam juntos até a velha casa na colina.",
    ),
    "pl": (
        "Dobrze.",
        "Idziesz z nami dziś wieczorem?",
        "Co za wspaniała niespodzianka!",
        "Kiedy poranny pociąg w końcu dotarł na małą stację, podróżni zabrali torby i płaszcze, przywitali "
        "przyjaciół, którzy czekali na nich w chłodzie, i poszli razem wzdłuż rzeki do starego domu na wzgórzu.",
    ),
    "tr": (
        "Tamam.",
        "Bu akşam bizimle geliyor musun?",
        "Ne harika bir sürpriz!",
        "Sabah treni sonunda küçük istasyona vardığında yolcular çantalarını ve paltolarını aldılar, soğukta "
        "onları bekleyen arkadaşlarını selamladılar ve nehir boyunca birlikte yürüyerek tepedeki eski eve gittiler.",
    ),
    "ru": (
        "Хорошо.",
        "Ты пойдёшь с нами сегодня вечером?",
        "Какой замечательный сюрприз!",
        "Когда утренний поезд прибыл на маленькую станцию, путешественники взяли сумки и пальто, поздоровались с "
        "друзьями и вместе пошли вдоль реки к старому дому на холме.",
    ),
    "nl": (
        "Oké.",
        "Ga je vanavond met ons mee?",
        "Wat een geweldige verrassing!",
        "Toen de ochtendtrein eindelijk het kleine station bereikte, pakten de reizigers hun tassen en jassen, "
        "begroetten ze de vrienden die in de kou op hen hadden gewacht en liepen ze samen langs de rivier naar het "
        "oude huis op de heuvel.",
    ),
    "cs": (
        "Dobře.",
        "Půjdeš s námi dnes večer?",
        "To je ale krásné překvapení!",
        "Když ranní vlak dorazil na malé nádraží, cestující si vzali tašky a kabáty, pozdravili přátele, kteří na "
        "ně čekali v zimě, a šli spolu podél řeky ke starému domu na kopci.",
    ),
    "ar": (
        "حسنًا.",
        "هل ستأتي معنا الليلة؟",
        "يا لها من مفاجأة رائعة!",
        "عندما وصل قطار الصباح إلى المحطة الصغيرة، أخذ المسافرون حقائبهم، وسلموا على الأصدقاء الذين كانوا "
        "ينتظرونهم، ثم مشوا على طول النهر إلى البيت القديم على التل.",
    ),
    "zh-cn": (
        "好的。",
        "你今晚和我们一起去吗？",
        "真是一个美好的惊喜！",
        "早上的火车终于到达了小车站，旅客们拿起自己的包和外套，和在寒风中等候的朋友们打过招呼，"
        "然后一起沿着河边走向山上那座温暖的老房子。",
    ),
    "hu": (
        "Rendben.",
        "Eljössz velünk ma este?",
        "Micsoda csodálatos meglepetés!",
        "Amikor a reggeli vonat megérkezett a kis állomásra, az utasok fogták a táskáikat és a kabátjaikat, "
        "üdvözölték a hidegben rájuk váró barátaikat, és együtt sétáltak a folyó mentén a domb tetején álló régi "
        "házhoz.",
    ),
    "ko": (
        "네, 좋아요.",
        "오늘 밤 우리랑 같이 갈래요?",
        "정말 멋진 깜짝 선물이네요!",
        "아침 기차가 작은 역에 도착하자 여행자들은 가방과 외투를 챙겨 추위 속에서 기다리던 친구들과 인사를 "
        "나누고 강을 따라 언덕 위의 오래된 집으로 걸어갔습니다.",
    ),
    "ja": (
        "はい。",
        "今夜、私たちと一緒に来ますか？",
        "なんて素敵な驚きでしょう！",
        "朝の電車が小さな駅に着くと、旅人たちはかばんを持って、待っていた友人たちにあいさつし、"
        "一緒に丘の上の古い家へ向かいました。",
    ),
    "hi": (
        "ठीक है।",
        "क्या तुम आज रात हमारे साथ चलोगे?",
        "कितना शानदार आश्चर्य है!",
        "जब सुबह की ट्रेन छोटे स्टेशन पर पहुँची, तो यात्रियों ने अपने बैग उठाए, दोस्तों से मिले और साथ मिलकर "
        "नदी के किनारे पुराने घर की ओर चल पड़े।",
    ),
    "amh": (
        "እሺ።",
        "ዛሬ ማታ ከእኛ ጋር ትመጣለህ?",
        "እንዴት ያለ አስደናቂ ነገር ነው!",
        "የጠዋቱ ባቡር በመጨረሻ ትንሿ ጣቢያ ሲደርስ ተጓዦቹ ቦርሳዎቻቸውንና ካፖርቶቻቸውን ይዘው በብርዱ ሲጠብቋቸው የነበሩትን "
        "ወዳጆቻቸውን ሰላም አሉና አብረው በወንዙ ዳር ወደ ኮረብታው ላይ ወዳለው አሮጌ ቤት ሄዱ።",
    ),
}

# A sentence's closing punctuation (Latin, Ethiopic, CJK, Arabic, Devanagari), removed before another is put.
_ENDING = re.compile(r"[\s.!?。！？؟።፧।…,;:،፣、]+$")


def probes_for(language: str, eval_texts: Iterable[str] = ()) -> list[Probe]:
    """The four probes of `language`: its own list, else built from `eval_texts` (the dataset's eval rows)."""
    own = PROBES.get(canonical_language(language))
    if own is not None:
        return [Probe(kind, text) for kind, text in zip(PROBE_KINDS, own, strict=True)]
    return probes_from_texts(list(eval_texts), char_limit(language))


def _bare(text: str) -> str:
    return _ENDING.sub("", " ".join(text.split()))


def probes_from_texts(texts: Sequence[str], limit: int) -> list[Probe]:
    """Probes for a language without a list, from its own texts: the first words of the shortest text as the short
    one, two texts (their first words) ending in "?" and "!", and texts joined with commas up to LONG_SHARE of
    `limit` as the long one. Fewer when there is nothing to build them from."""
    bare = [b for b in (_bare(t) for t in texts) if b]
    if not bare:
        return []
    by_length = sorted(bare, key=len)
    probes = [Probe("short", " ".join(by_length[0].split()[:SHORT_WORDS]) + ".")]
    longest = by_length[::-1]
    probes.append(Probe("question", " ".join(longest[0].split()[:8]) + "?"))
    probes.append(Probe("exclamation", " ".join(longest[min(1, len(longest) - 1)].split()[:8]) + "!"))
    long = ""
    for text in longest:
        joined = f"{long}, {text}" if long else text
        if len(joined) + 1 > LONG_SHARE * limit:
            continue
        long = joined
    if long:
        probes.append(Probe("long", long + "."))
    return probes

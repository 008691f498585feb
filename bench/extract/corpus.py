"""The extraction evaluation corpus: invoices, receipts, purchase orders, letters and CVs in
English, German, French, Spanish and Italian, laid out as key: value blocks, aligned tables and
prose, with each locale's numbers (2400.00, 15,750.00, 1.190,00, 264,30, 1 234,56) and dates,
optional fields left out at random, zero to five line items, and a truth label for every field
of the document's library schema (``None``: the document does not state it).

Seeded and reproducible; ``split`` is fixed per document ("tune" or "heldout", half each): the
held-out half is scored only at the end, never while tuning. Written for this corpus, not derived
from ``bench/extract_data.py``.

    python -m bench.extract.corpus --out DIR   # writes DIR/<id>.txt and DIR/labels.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.extract.locales import (
    CITIES,
    COMPANIES,
    GROCERIES,
    ITEMS,
    LANGS,
    PEOPLE,
    POSITIONS,
    date_text,
    money,  # fmt: skip
    money_number,
    random_day,
)
from bench.extract.words import LETTER_BODY, PROSE, PROSE_BUYER, PROSE_DUE, STREETS, SUBJECTS, WORDS

KINDS = {"invoice": "invoice", "receipt": "receipt", "purchase_order": "purchase_order",
         "letter": "letter", "cv": "cv"}  # kind -> library schema name  # fmt: skip
CURRENCIES = {"en": ["USD", "GBP", "EUR"], "de": ["EUR", "EUR", "CHF"], "fr": ["EUR"],
              "es": ["EUR"], "it": ["EUR"]}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Doc:
    id: str
    kind: str
    lang: str
    layout: str
    split: str
    text: str
    label: dict[str, Any]

    @property
    def schema(self) -> str:
        return KINDS[self.kind]


def make_corpus(n: int = 300, seed: int = 29) -> list[Doc]:
    """``n`` documents cycling through kinds and languages; even positions tune, odd held out
    (after a seeded shuffle, so both halves hold every kind and language)."""
    rng = random.Random(seed)
    makers = {"invoice": invoice, "receipt": receipt, "purchase_order": purchase_order,
              "letter": letter, "cv": cv}  # fmt: skip
    docs = []
    order = list(range(n))
    random.Random(seed + 1).shuffle(order)
    for i in range(n):
        kind = list(makers)[i % len(makers)]
        lang = LANGS[(i // len(makers)) % len(LANGS)]
        layout, text, label = makers[kind](lang, rng)
        split = "tune" if order[i] % 2 == 0 else "heldout"
        docs.append(Doc(f"{kind}-{lang}-{i:03d}", kind, lang, layout, split, text, label))
    return docs


def _w(lang: str, key: str, rng: random.Random) -> str:
    return rng.choice(WORDS[lang][key])


def _items(lang: str, rng: random.Random, names: dict[str, list[str]], low: int, high: int):
    count = rng.randint(low, high)
    picked = rng.sample(names[lang], count)
    out = []
    for name in picked:
        qty = rng.choice([1, 1, 2, 3, 5, 10, 12])
        unit = round(rng.uniform(3, 900) if names is ITEMS else rng.uniform(0.5, 12), 2)
        out.append({"description": name, "quantity": qty, "amount": round(qty * unit, 2)})
    return out


def _totals(items, rng: random.Random, lang: str):
    net = round(sum(i["amount"] for i in items) if items else rng.uniform(80, 25000), 2)
    rate = {"en": 0.2, "de": 0.19, "fr": 0.2, "es": 0.21, "it": 0.22}[lang]
    tax = round(net * rate, 2) if rng.random() < 0.6 else None
    return net, tax, round(net + (tax or 0), 2)


def _table(lang, items, currency, rng, with_qty=True) -> list[str]:
    desc, qty, amt = (_w(lang, k, rng) for k in ("desc", "qty", "amount"))
    head = f"{desc:<32}{qty:>6}{amt:>16}" if with_qty else f"{desc:<32}{amt:>16}"
    lines = [head, "-" * len(head)]
    for it in items:
        value = money_number(it["amount"], lang, rng)
        row = f"{it['description']:<32}" + (f"{it['quantity']:>6}" if with_qty else "")
        lines.append(row + f"{value:>16}")
    return lines


def _totals_lines(lang, net, tax, total, currency, rng) -> list[str]:
    lines = []
    if tax is not None:
        lines.append(f"{_w(lang, 'subtotal', rng)}: {money(net, currency, lang, rng)}")
        lines.append(f"{_w(lang, 'tax', rng)}: {money(tax, currency, lang, rng)}")
    lines.append(f"{_w(lang, 'total', rng)}: {money(total, currency, lang, rng)}")
    return lines


def _code(rng: random.Random, prefixes: list[str]) -> str:
    prefix = rng.choice(prefixes)
    return prefix + rng.choice([f"{rng.randint(2023, 2025)}-{rng.randint(1, 9999):04d}",
                                f"{rng.randint(100, 99999)}", f"{rng.randint(10, 99)}/{rng.randint(100, 999)}"])  # fmt: skip


def invoice(lang: str, rng: random.Random):
    seller, buyer = rng.sample(COMPANIES[lang], 2)
    buyer = buyer if rng.random() < 0.8 else None
    currency = rng.choice(CURRENCIES[lang]) if rng.random() < 0.85 else None
    issued = random_day(rng)
    due = issued.replace(day=min(issued.day, 28)) if rng.random() < 0.6 else None
    if due is not None:
        due = due.fromordinal(issued.toordinal() + rng.choice([14, 30]))
    number = _code(rng, ["INV-", "RE-", "F", "FA-", "", "2024/"])
    layout = rng.choice(["kv", "table", "prose"])
    items = [] if layout == "prose" else _items(lang, rng, ITEMS, 0, 4)
    net, tax, total = _totals(items, rng, lang)
    date_s = date_text(issued, lang, rng)
    due_s = date_text(due, lang, rng) if due else None
    if layout == "prose":
        city = rng.choice(CITIES[lang])
        greeting = _w(lang, "dear", rng).format(r=rng.choice(PEOPLE[lang]))
        tail = PROSE_DUE[lang].format(d=due_s) if due_s else ""
        who = PROSE_BUYER[lang].format(b=buyer) if buyer else ""
        body = PROSE[lang].format(no=number, date=date_s, buyer=who,
                                  total=money(total, currency, lang, rng), due=tail)  # fmt: skip
        lines = [seller, city, "", f"{city}, {date_s}", "", greeting, body, "",
                 _w(lang, "regards", rng), seller]  # fmt: skip
    else:
        head = [f"{_w(lang, 'invoice', rng)}   {_w(lang, 'inv_no', rng)}: {number}"]
        parties = [f"{_w(lang, 'from', rng)}: {seller}"]
        if buyer:
            parties.append(f"{_w(lang, 'to', rng)}: {buyer}")
        dates = [f"{_w(lang, 'date', rng)}: {date_s}"]
        if due_s:
            dates.append(f"{_w(lang, 'due', rng)}: {due_s}")
        if layout == "table":
            head = [seller, f"{_w(lang, 'invoice', rng)} {number}", "   ".join(dates)]
            parties = [f"{_w(lang, 'to', rng)}: {buyer}"] if buyer else []
        body = _table(lang, items, currency, rng) if items else []
        lines = [*head, *dates * (layout == "kv"), "", *parties, "", *body, "",
                 *_totals_lines(lang, net, tax, total, currency, rng)]  # fmt: skip
    label = {"invoice_number": number, "issue_date": issued.isoformat(),
             "due_date": due.isoformat() if due else None, "seller": seller, "buyer": buyer,
             "currency": currency, "line_items": items or None, "total": total}  # fmt: skip
    return layout, "\n".join(lines) + "\n", label


def receipt(lang: str, rng: random.Random):
    merchant = rng.choice(COMPANIES[lang])
    currency = rng.choice(CURRENCIES[lang]) if rng.random() < 0.7 else None
    day = random_day(rng)
    items = _items(lang, rng, GROCERIES, 1, 5)
    for it in items:
        it["amount"] = round(it["amount"] / it["quantity"], 2)
    net = round(sum(i["amount"] for i in items), 2)
    tax = round(net * 0.07, 2) if rng.random() < 0.5 else None
    total = round(net + (tax or 0), 2)
    pay = rng.choice(["cash", "card", "mobile", None])
    layout = rng.choice(["till", "kv"])
    city = rng.choice(CITIES[lang])
    merchant = merchant.upper() if layout == "till" else merchant  # the label: as printed
    lines = [merchant, city,
             f"{date_text(day, lang, rng)}  {rng.randint(8, 20)}:{rng.randint(0, 59):02d}", ""]  # fmt: skip
    lines += [f"{it['description']:<26}{money_number(it['amount'], lang, rng):>10}" for it in items]
    lines += ["", *_totals_lines(lang, net, tax, total, currency, rng)]
    if pay:
        lines.append(WORDS[lang]["paid"][pay])
    lines.append(_w(lang, "receipt", rng))
    label = {"merchant": merchant, "date": day.isoformat(), "currency": currency,
             "items": [{"name": i["description"], "price": i["amount"]} for i in items],
             "tax": tax, "total": total, "payment_method": pay}  # fmt: skip
    return layout, "\n".join(lines) + "\n", label


def purchase_order(lang: str, rng: random.Random):
    supplier, buyer = rng.sample(COMPANIES[lang], 2)
    currency = rng.choice(CURRENCIES[lang]) if rng.random() < 0.85 else None
    ordered = random_day(rng)
    delivery = ordered.fromordinal(ordered.toordinal() + 21) if rng.random() < 0.6 else None
    number = _code(rng, ["PO-", "B-", "BC-", "OC-", "ORD-"])
    items = _items(lang, rng, ITEMS, 1, 5)
    net, tax, total = _totals(items, rng, lang)
    layout = rng.choice(["kv", "table"])
    lines = [f"{_w(lang, 'po', rng)}", f"{_w(lang, 'po_no', rng)}: {number}",
             f"{_w(lang, 'order_date', rng)}: {date_text(ordered, lang, rng)}"]  # fmt: skip
    if delivery:
        lines.append(f"{_w(lang, 'delivery', rng)}: {date_text(delivery, lang, rng)}")
    lines += ["", f"{_w(lang, 'supplier', rng)}: {supplier}", f"{_w(lang, 'buyer', rng)}: {buyer}"]
    lines += ["", *_table(lang, items, currency, rng, with_qty=layout == "table"), ""]
    lines += _totals_lines(lang, net, tax, total, currency, rng)
    if layout != "table":  # the document states no quantities
        items = [{k: v for k, v in it.items() if k != "quantity"} for it in items]
    label = {"po_number": number, "order_date": ordered.isoformat(),
             "delivery_date": delivery.isoformat() if delivery else None, "supplier": supplier,
             "buyer": buyer, "currency": currency, "line_items": items, "total": total}  # fmt: skip
    return layout, "\n".join(lines) + "\n", label


def letter(lang: str, rng: random.Random):
    sender, recipient = rng.sample(COMPANIES[lang] + PEOPLE[lang], 2)
    day = random_day(rng)
    subject = rng.choice(SUBJECTS[lang]) if rng.random() < 0.7 else None
    city = rng.choice(CITIES[lang])
    signer = rng.choice(PEOPLE[lang])
    lines = [sender, STREETS[lang].format(n=rng.randint(1, 120)),
             city, "", recipient, rng.choice(CITIES[lang]), "", f"{city}, {date_text(day, lang, rng)}", ""]  # fmt: skip
    if subject:
        lines += [f"{_w(lang, 'subject', rng)} {subject}", ""]
    lines += [_w(lang, "dear", rng).format(r=signer.split()[0]), LETTER_BODY[lang], "",
              _w(lang, "regards", rng), signer if sender in COMPANIES[lang] else sender]  # fmt: skip
    label = {"sender": sender, "recipient": recipient, "date": day.isoformat(), "subject": subject}
    return "letter", "\n".join(lines) + "\n", label


def cv(lang: str, rng: random.Random):
    name = rng.choice(PEOPLE[lang])
    first, last = name.split(" ", 1)
    email = f"{first}.{last}@example.com".lower().replace(" ", "").replace("'", "")
    for a, b in (("ä", "ae"), ("ö", "oe"), ("ü", "ue")):
        email = email.replace(a, b)
    email = unicodedata.normalize("NFKD", email).encode("ascii", "ignore").decode()
    phone = f"+{rng.choice([44, 49, 33, 34, 39])} {rng.randint(100, 999)} {rng.randint(1000000, 9999999)}"
    phone = phone if rng.random() < 0.7 else None
    born = random_day(rng).replace(year=rng.randint(1965, 2000)) if rng.random() < 0.5 else None
    city = rng.choice(CITIES[lang])
    position, before = rng.sample(POSITIONS[lang], 2)
    employer, old = rng.sample(COMPANIES[lang], 2)
    was = rng.randint(2015, 2021)
    since = _w(lang, "since", rng).format(y=was + 1)
    lines = [_w(lang, "cv", rng), "", name, f"{_w(lang, 'email', rng)}: {email}"]
    if phone:
        lines.append(f"{_w(lang, 'phone', rng)}: {phone}")
    lines.append(f"{_w(lang, 'address', rng)}: {city}")
    if born:
        lines.append(f"{_w(lang, 'born', rng)}: {date_text(born, lang, rng)}")
    lines += ["", _w(lang, "experience", rng), f"{since}: {position}, {employer}",
              f"{was - 4} - {was}: {before}, {old}"]  # fmt: skip
    label = {"name": name, "email": email, "phone": phone, "city": city,
             "date_of_birth": born.isoformat() if born else None, "position": position,
             "employer": employer}  # fmt: skip
    return "cv", "\n".join(lines) + "\n", label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--docs", type=int, default=300)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "labels.jsonl", "w", encoding="utf-8") as f:
        for d in make_corpus(args.docs):
            (out / f"{d.id}.txt").write_text(d.text, encoding="utf-8")
            meta = {
                "id": d.id,
                "kind": d.kind,
                "lang": d.lang,
                "layout": d.layout,
                "split": d.split,
            }
            f.write(json.dumps({**meta, "label": d.label}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

"""The values a text states, read in its own locale: numbers, dates and currencies."""

from __future__ import annotations

import pytest

from stencil.constraints.grounding.stated import (
    currencies_in,
    currencies_named,
    date_mentions,
    dates_in,
    dois_in,
    ibans_in,
    numbers_in,
    numbers_in_units,
    phones_in,
    times_in,
)


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Total due: 2400.00", [2400.0]),  # en, no grouping
        ("Total: 15,750.00", [15750.0]),  # en, comma groups
        ("Gesamtbetrag: 1.190,00 €", [1190.0]),  # de, dot groups, decimal comma
        ("Summe 264,30 EUR", [264.3]),  # de, decimal comma
        ("Total TTC : 1\u202f234,56 €", [1234.56]),  # fr, narrow no-break space groups
        ("Net à payer : 12 769,24", [12769.24, 12.0, 769.24]),  # a plain space: both readings
        ("CHF 1'234.50", [1234.5]),  # Swiss apostrophe groups
        ("Salary: $95k - $120k, or 1.5K", [95000.0, 120000.0, 1500.0]),  # thousands
        ("Betrag 1.190 und 12,50", [1190.0, 12.5]),  # the text's decimal mark decides 1.190
        ("Price 1,580 and 2.50", [1580.0, 2.5]),
        ("only 1,580", [1580.0, 1.58]),  # no decimal mark shown: both readings
        ("Datum 17.4.2024, v1.2.3, 19:56, MwSt. 19%", [19.0]),  # no date, version or clock time
        # a month and year in digits, a year range without spaces: the years
        ("03/2021 – heute, 06.2016 – 02.2021", [2021.0, 2016.0]),
        ("2019-05 to 2021-11; TU Berlin 2014-2016", [2019.0, 2021.0, 2014.0, 2016.0]),
        ("geb. 17.03.1991, Regulation 2016/679", []),  # a date and an act's number: none
    ],
)
def test_numbers_in_each_locale(text, numbers):
    assert numbers_in(text) == numbers


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("Rechnungsdatum: 04.03.2024, fällig am 3. April 2024", ["2024-03-04", "2024-04-03"]),
        (
            "Émise le 1er mars 2024, total 12,50 €, échéance 04/04/2024",
            ["2024-03-01", "2024-04-04"],
        ),
        ("Fecha: 4 de marzo de 2024", ["2024-03-04"]),
        ("Data: 24 dicembre 2024", ["2024-12-24"]),
        ("Date: 13/03/2024", ["2024-03-13"]),  # day > 12: day first whatever the locale
        # decimal points: day or month first unknown, both readings (day first first)
        ("signed 03/04/2024, total 12.50", ["2024-04-03", "2024-03-04"]),
        ("Sevilla, 11/11/2024", ["2024-11-11"]),  # day = month: one reading either way
        # a range naming its month and year once: both days
        ("du 4 au 6 décembre 2026", ["2026-12-04", "2026-12-06"]),
        ("sábado 7 y domingo 8 de noviembre de 2026", ["2026-11-07", "2026-11-08"]),  # a pair
        ("13 and 14 June 2026", ["2026-06-13", "2026-06-14"]),
        ("4. bis 6. Dezember 2026", ["2026-12-04", "2026-12-06"]),
        ("del 4 al 6 de diciembre de 2026", ["2026-12-04", "2026-12-06"]),
        ("Dec 4\u20136, 2026", ["2026-12-04", "2026-12-06"]),
        ("Du vendredi 4 au dimanche 6 décembre 2026", ["2026-12-04", "2026-12-06"]),
        ("vom Freitag, 4. bis Sonntag, 6. Dezember 2026", ["2026-12-04", "2026-12-06"]),
        ("pages 245-276, 2025", []),
        # month names of the lexicon's other languages (Polish and Czech in the genitive)
        ("woensdag 7 oktober 2026, volgende 3 maart 2027", ["2026-10-07", "2027-03-03"]),
        ("Lisboa, 14 de março de 2026", ["2026-03-14"]),
        ("Kraków, 14 października 2026 r.", ["2026-10-14"]),
        ("(7 kwi 2026, 14:02), 3 paź 2026", ["2026-04-07", "2026-10-03"]),  # abbreviated
        ("den 2 augusti 2026; 1. desember 2026", ["2026-08-02", "2026-12-01"]),
        ("V Praze dne 14. března 2026, splatnost 28. 3. 2026", ["2026-03-14", "2026-03-28"]),
        ("des 12 participants, le 3 mars 2026", ["2026-03-03"]),  # no month read in "des"
        ("Due: 3rd of March 2026; 14 de septiembre del 2026", ["2026-03-03", "2026-09-14"]),
        (
            "Invoice 03-Mar-2026, shipped 5-Mar-26, paid 9 Mar '26",
            ["2026-03-03", "2026-03-05", "2026-03-09"],
        ),
        ("Bon 07.12.26 14:02, Python 3.11.2.1, 1.2.26.4", ["2026-12-07"]),  # a two-digit year
        # a date wrapped onto the next line of a paragraph; not across a blank line
        ("el día 27 de\nfebrero de 2026, convocada", ["2026-02-27"]),
        ("am 14. \n  März 2026; on March\n3, 2026", ["2026-03-14", "2026-03-03"]),
        ("Nr. 14\n\nMärz 2026", []),
    ],
)
def test_dates_in_each_locale(text, dates):
    assert dates_in(text) == dates


@pytest.mark.parametrize(
    ("text", "times"),
    [
        ("um 09:15 Uhr, Ende 17 Uhr", ["09:15", "17:00"]),
        (
            "à 15h30 ; 9.15 Uhr ; 3 pm ; 10:30 a.m. ; 12:00pm",
            ["15:30", "09:15", "15:00", "10:30", "12:00"],
        ),
        ("Total 12.50, v1.2.3, 25:00, 2024-03-04 08:00:00", ["08:00"]),
        (
            "Aanvang: 20.00 uur; kl. 18.30, ore 20.45; godz. 9.15",
            ["20:00", "18:30", "20:45", "09:15"],
        ),
        ("klo 12.5, alle 10.30.5, kl. 7.30.", ["07:30"]),
        (
            "Vernisáž čtvrtek v 18.00, o 19.30, om 20.15; v 1. patře, u 3 osob",
            ["18:00", "19:30", "20:15"],
        ),
        ("Konsert kl 19, ore 20; godz. 18; alle 11 ferdigheter", ["19:00", "20:00", "18:00"]),
        # an e-mail's timestamp (its zone offset after it) is when it was sent
        ("Date: Tue, 10 Mar 2026 21:14:03 +0100\n\nopening om 14.00 uur", ["14:00"]),
    ],
)
def test_times_in(text, times):
    assert times_in(text) == times


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        # a day and month without a year: the year of the full dates beside it
        ("Sent: 12 Nov 2026\nI bought it on October 14. It broke.", ["2026-11-12", "2026-10-14"]),
        ("Termin am 14. Oktober; Brief vom 01.09.2026", ["2026-10-14", "2026-09-01"]),
        # on the full date's line: its year and the day's occurrence nearest it
        ("December 3, and 4 March 2024", ["2024-12-03", "2023-12-03", "2024-03-04"]),
        # on the line of several full dates: each one's year
        (
            "le 14 octobre, du 3 novembre 2026 et 2 janvier 2027",
            ["2026-10-14", "2027-10-14", "2026-11-03", "2027-01-02"],
        ),
        ("I bought it on October 14.", []),  # no year anywhere: no date
        ("Version 2 may work. 1 March 2025", ["2025-03-01"]),  # "may" the word
        ("v 3.5 Mar 2.1, 2024-01-01", ["2024-01-01"]),  # numbers around a month's letters
        # a month named with its year lends it (after the full dates)
        ("Newsletter März 2026\nKonzert am 14. März", ["2026-03-14"]),
        ("Boletín de marzo de 2026: taller el 9 de abril", ["2026-04-09"]),
        # a weekday before it: the year (or the one after) where the day falls
        ("Posted 15 December 2026. Fri 8 Jan: party", ["2026-12-15", "2027-01-08"]),
        ("Nyhetsbrev desember 2026. Lørdag 9. januar: konsert", ["2027-01-09"]),
        ("Sa., 14. März; Newsletter März 2026", ["2026-03-14"]),
        # on another line: the occurrence nearest the text's date
        ("Posted 15 December 2026\n8 Jan: party", ["2026-12-15", "2027-01-08"]),
        ("Stockholm 11 januari 2027\nköpt den 28 december", ["2027-01-11", "2026-12-28"]),
        ("on 9 January 2026; again on 3 March", ["2026-01-09", "2026-03-03"]),  # "on" no day
    ],
)
def test_dates_without_a_year(text, dates):
    assert dates_in(text) == dates


def test_date_mentions_keep_repeats():
    text = "Bremen, 09.06.2024\nRechnung vom 09.06.2024, fällig 23.06.2024"
    assert date_mentions(text) == ["2024-06-09", "2024-06-09", "2024-06-23"]
    assert dates_in(text) == ["2024-06-09", "2024-06-23"]


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Total £12.00, or EUR 14,00", ["GBP", "EUR"]),
        ("Gesamt: 1.190,00 €", ["EUR"]),
        ("Total: CHF 14,30", ["CHF"]),
        ("ISO 9001, VAT 20%, ABC Ltd", []),  # three capitals that are no currency
        ("Cena: 45,20 zł; R$ 120,00; 1 200 Kč; $5", ["PLN", "BRL", "CZK", "USD"]),
        ("Złoty Róg, Kčarek", []),  # a sign of letters only as a word
    ],
)
def test_currencies_in(text, codes):
    assert currencies_in(text) == codes


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("paid in euros", {"EUR"}),
        ("Pris: 300 kr", {"SEK", "NOK", "DKK"}),  # kr: every krona it may be
        ("1.200 kroner", {"NOK", "DKK"}),
        ("100 dollars", {"USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN"}),
    ],
)
def test_currencies_named(text, codes):
    assert currencies_named(text) == codes


@pytest.mark.parametrize(
    ("text", "ibans"),
    [
        ("IBAN: DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX", ["DE89 3704 0044 0532 0130 00"]),
        ("Virement : FR76 3000 6000 0112 3456 7890 189.", ["FR76 3000 6000 0112 3456 7890 189"]),
        ("pay to GB29NWBK60161331926819 by Friday", ["GB29NWBK60161331926819"]),
        ("SIRET 812 345 678 00021, card ending in 4417", []),  # numbers, no IBAN
        ("VAT DE123456789, order AB12 3456", []),  # too short for an IBAN
    ],
)
def test_ibans_in(text, ibans):
    assert ibans_in(text) == ibans


@pytest.mark.parametrize(
    ("text", "phones"),
    [
        ("Rückruf unter 0171 2233445.", ["0171 2233445"]),
        ("WhatsApp: +49 176 44455566 — Lena", ["+49 176 44455566"]),
        ("Call (555) 123-4567 or 555.123.4567", ["(555) 123-4567", "555.123.4567"]),
        ("Tel. +44 (0)20 7946 0958", ["+44 (0)20 7946 0958"]),
        ("Teléfono: (+34) 634 218 907; 09/2017 – 02/2021", ["(+34) 634 218 907"]),  # a period
        ("telefoon 030 - 232 18 40, Fax 0711 / 12 34 56", ["030 - 232 18 40", "0711 / 12 34 56"]),
        ("open 2019 – 2024, rooms 12 - 14", []),  # a year range and a range
        ("Total 1.284,60 on 2026-10-14 and 14.03.2026; 2020-2023; room 16", []),
        ("https://doi.org/10.18653/v1/2023.emnlp-main.42", []),  # a DOI's prefix
        ("Rozporządzenie (UE) 2016/679; D.Lgs. 196/2003; tel. 0711/123456", ["0711/123456"]),
    ],
)
def test_phones_in(text, phones):
    assert phones_in(text) == phones


def test_dois_in():
    text = "https://doi.org/10.18653/v1/2025.acl-1.11\nDOI: 10.1007/s44295-026-00127-3. Vol. 10.5"
    assert dois_in(text) == ["10.18653/v1/2025.acl-1.11", "10.1007/s44295-026-00127-3"]
    # a Markdown link: the DOI ends where Crossref's characters do
    link = "DOI: [10.31219/osf.io/7xk2p](https://doi.org/10.31219/osf.io/7xk2p)"
    assert dois_in(link) == ["10.31219/osf.io/7xk2p"]


@pytest.mark.parametrize(
    ("text", "units", "numbers"),
    [
        ("15,50 € pro Stunde, 37 timer om ugen, 600 euros al mes", {"year"}, []),
        ("15,50 € pro Stunde, 37 timer om ugen, 600 euros al mes", {"hour"}, [15.5]),
        ("Rent: 1,200/month. 65 m² (700 sq ft)", {"square_metre"}, [65.0]),
        ("| Bedrooms | 2\n| Square feet | 850", {"square_metre"}, [2.0]),  # a row's label
        ("RAL 35.000,00 € + 10 % bonus, 2 sedi", {"year"}, [35000.0, 2.0]),  # RAL: yearly pay
        ("Budget: £38k–£44k pro rata, paid monthly.", {"year"}, [38000.0, 44000.0]),
        ("Kaltmiete 850,00 €, Kaution 2.550,00 €", {"month"}, [850.0, 2550.0]),  # no unit: kept
        ("Gehalt 4.500,00 – 5.200,00 € brutto monatlich", {"year"}, []),  # a range: its last's unit
        ("Gehalt 4.500,00 – 5.200,00 € brutto monatlich", {"month"}, [4500.0, 5200.0]),
    ],
)
def test_numbers_in_units(text, units, numbers):
    assert numbers_in_units(text, frozenset(units)) == numbers

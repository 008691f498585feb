"""Locale data for the evaluation corpus (``corpus.py``): how English, German, French, Spanish and
Italian documents write numbers, dates and money, and the words their documents use. Written for
this corpus, independent of ``bench/extract_data.py`` (the generator the default prompt was tuned
on)."""

from __future__ import annotations

import datetime
import random

LANGS = ("en", "de", "fr", "es", "it")

MONTHS = {
    "en": "January February March April May June July August September October November December",
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre "
    "dicembre",
}


def money_number(value: float, lang: str, rng: random.Random) -> str:
    """``value`` with two decimals as a document in ``lang`` writes it (with or without grouping)."""
    whole, cents = f"{value:.2f}".split(".")
    grouped = f"{int(whole):,}"
    if lang == "en":
        return rng.choice([f"{grouped}.{cents}", f"{whole}.{cents}"])
    if lang == "fr":
        sep = rng.choice([" ", "\u202f", "\u00a0"])
        return f"{grouped.replace(',', sep)},{cents}"
    return rng.choice([f"{grouped.replace(',', '.')},{cents}", f"{whole},{cents}"])


def money(value: float, currency: str | None, lang: str, rng: random.Random) -> str:
    """An amount with its currency as symbol or code (or bare when ``currency`` is None)."""
    num = money_number(value, lang, rng)
    if currency is None:
        return num
    symbol = {"EUR": "€", "USD": "$", "GBP": "£", "CHF": "CHF"}[currency]
    if lang == "en":
        return rng.choice([f"{symbol}{num}" if symbol != "CHF" else f"CHF {num}",
                           f"{currency} {num}", f"{num} {currency}"])  # fmt: skip
    return rng.choice([f"{num} {symbol}", f"{num} {currency}", f"{currency} {num}"])


def date_text(day: datetime.date, lang: str, rng: random.Random) -> str:
    """``day`` as a document in ``lang`` writes it (never an ambiguous order for its locale)."""
    month = MONTHS[lang].split()[day.month - 1]
    d, m, y = day.day, day.month, day.year
    forms = {
        "en": [day.isoformat(), f"{month} {d}, {y}", f"{d} {month[:3]} {y}", f"{d} {month} {y}"],
        "de": [f"{d:02d}.{m:02d}.{y}", f"{d}. {month} {y}", f"{d}.{m}.{y}"],
        "fr": [f"{d:02d}/{m:02d}/{y}", f"{'1er' if d == 1 else d} {month} {y}"],
        "es": [f"{d:02d}/{m:02d}/{y}", f"{d} de {month} de {y}"],
        "it": [f"{d:02d}/{m:02d}/{y}", f"{d} {month} {y}"],
    }
    return rng.choice(forms[lang])


def random_day(rng: random.Random) -> datetime.date:
    return datetime.date(2023, 1, 1) + datetime.timedelta(days=rng.randrange(900))


COMPANIES = {
    "en": ["Northwind Traders Ltd.", "Blue Harbor Consulting LLC", "Pinecrest Software Inc.",
           "Redwood Office Supplies", "Harper & Lane Architects", "Silverline Logistics plc",
           "Oakfield Dental Group", "Brightwater Media Ltd.", "Kestrel Engineering Co.",
           "Mapleleaf Catering"],
    "de": ["Müller & Söhne GmbH", "Bergmann Elektrotechnik AG", "Schreinerei Vogel",
           "Hoffmann Logistik GmbH", "Kaiser Druck & Medien KG", "Weber IT-Service GmbH",
           "Bäckerei Lehmann", "Brandt Sanitärtechnik GmbH", "Fischer & Partner Steuerberater",
           "Zimmermann Bau GmbH"],
    "fr": ["Atelier Dubois SARL", "Boulangerie Martin", "Lefèvre Conseil SAS",
           "Transports Girard et Fils", "Imprimerie Moreau", "Cabinet Rousseau Avocats",
           "Garage Laurent SARL", "Menuiserie Bernard", "Éditions Fontaine", "Chauvet Informatique SAS"],
    "es": ["Construcciones García S.L.", "Distribuciones Martínez S.A.", "Panadería López",
           "Talleres Fernández S.L.", "Gestoría Romero y Asociados", "Imprenta Navarro",
           "Transportes Ruiz S.A.", "Clínica Dental Torres", "Ferretería Domínguez",
           "Suministros Herrera S.L."],
    "it": ["Rossi Forniture S.r.l.", "Studio Bianchi Architetti", "Tipografia Ferrari",
           "Colombo Impianti S.p.A.", "Panificio Romano", "Ricci Trasporti S.r.l.",
           "Officina Marino", "Gallo Consulenze S.r.l.", "Ferramenta Conti", "Esposito Arredamenti"],
}  # fmt: skip

PEOPLE = {
    "en": ["Sarah Whitfield", "James O'Connor", "Priya Raman", "Daniel Brooks", "Emily Carter",
           "Michael Chen", "Olivia Grant", "Thomas Reed"],
    "de": ["Anna Schneider", "Jürgen Becker", "Katrin Wolf", "Stefan Krüger", "Lena Hartmann",
           "Matthias Schäfer", "Sabine Koch", "Tobias Richter"],
    "fr": ["Camille Lefebvre", "Julien Mercier", "Élodie Petit", "Nicolas Fabre", "Sophie Garnier",
           "Antoine Leroy", "Claire Masson", "Hugo Chevalier"],
    "es": ["Lucía Sánchez", "Javier Moreno", "Carmen Jiménez", "Alejandro Ruiz", "Marta Álvarez",
           "Pablo Castillo", "Elena Ortega", "Diego Serrano"],
    "it": ["Giulia Russo", "Marco Esposito", "Chiara Greco", "Luca Bruno", "Francesca Galli",
           "Alessandro Costa", "Sara Fontana", "Davide Moretti"],
}  # fmt: skip

CITIES = {
    "en": ["London", "Manchester", "Boston", "Chicago", "Leeds", "Denver"],
    "de": ["München", "Hamburg", "Köln", "Stuttgart", "Leipzig", "Bremen"],
    "fr": ["Lyon", "Marseille", "Toulouse", "Nantes", "Bordeaux", "Lille"],
    "es": ["Madrid", "Sevilla", "Valencia", "Bilbao", "Zaragoza", "Málaga"],
    "it": ["Milano", "Torino", "Bologna", "Firenze", "Napoli", "Verona"],
}

ITEMS = {
    "en": ["Website maintenance", "Consulting hours", "Office chairs", "Printer toner",
           "Annual software licence", "Delivery charge", "Catering for 20 people",
           "Laptop repair", "Design of brochure", "Cleaning service"],
    "de": ["Wartung Heizungsanlage", "Beratungsstunden", "Büromöbel", "Druckerpatronen",
           "Softwarelizenz (1 Jahr)", "Versandkosten", "Montagearbeiten", "Elektroinstallation",
           "Fliesenarbeiten Bad", "Reinigung Büroräume"],
    "fr": ["Maintenance informatique", "Heures de conseil", "Fournitures de bureau",
           "Cartouches d'encre", "Licence logiciel annuelle", "Frais de livraison",
           "Réparation de la toiture", "Peinture salon", "Traduction de documents",
           "Nettoyage des locaux"],
    "es": ["Mantenimiento web", "Horas de consultoría", "Sillas de oficina", "Tóner de impresora",
           "Licencia anual de software", "Gastos de envío", "Reparación de fontanería",
           "Pintura de fachada", "Diseño de catálogo", "Servicio de limpieza"],
    "it": ["Manutenzione sito web", "Ore di consulenza", "Sedie da ufficio", "Toner stampante",
           "Licenza software annuale", "Spese di spedizione", "Riparazione impianto elettrico",
           "Tinteggiatura uffici", "Progettazione grafica", "Servizio di pulizia"],
}  # fmt: skip

GROCERIES = {
    "en": ["Milk 1L", "Sourdough bread", "Apples", "Coffee beans", "Cheddar", "Orange juice"],
    "de": ["Vollmilch 1L", "Roggenbrot", "Äpfel", "Kaffee", "Butter", "Mineralwasser"],
    "fr": ["Baguette", "Lait demi-écrémé", "Fromage comté", "Pommes", "Café moulu", "Croissants"],
    "es": ["Pan de barra", "Leche entera", "Aceite de oliva", "Naranjas", "Queso manchego",
           "Café molido"],
    "it": ["Pane casereccio", "Latte intero", "Parmigiano", "Mele", "Caffè macinato", "Pasta"],
}  # fmt: skip

POSITIONS = {
    "en": ["Senior Accountant", "Software Engineer", "Project Manager", "Marketing Lead"],
    "de": ["Bilanzbuchhalterin", "Softwareentwickler", "Projektleiter", "Vertriebsleiterin"],
    "fr": ["Chef de projet", "Développeur web", "Comptable", "Responsable marketing"],
    "es": ["Ingeniera de software", "Jefe de proyecto", "Contable", "Responsable de ventas"],
    "it": ["Ingegnere del software", "Responsabile acquisti", "Contabile", "Project manager"],
}

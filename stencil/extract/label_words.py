"""The words business documents print before a value, per concept, in English, German, French,
Spanish and Italian (lower case; ``:`` at the end: only counts followed by a colon, for short
words that are also prepositions), and which schema fields each concept labels (by field name,
or a run of its words: ``field_plan.concepts_of``)."""

from __future__ import annotations


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(","))


LABELS: dict[str, tuple[str, ...]] = {
    "total": _words(
        "total, total due, amount due, total amount, grand total, balance due, amount "
        "payable, total to pay, total payable, gesamt, gesamtbetrag, gesamtsumme, endbetrag, "
        "rechnungsbetrag, zu zahlen, zahlbetrag, summe, total ttc, montant total, montant "
        "ttc, net à payer, total à payer, montant à payer, montant dû, importe total, total a "
        "pagar, total factura, totale, totale da pagare, importo totale, totale fattura, "
        "importo dovuto, totale documento"
    ),
    "subtotal": _words(
        "subtotal, sub-total, sub total, net, net amount, total net, zwischensumme, netto, "
        "nettobetrag, summe netto, sous-total, total ht, montant ht, base imponible, "
        "subtotale, imponibile, totale imponibile"
    ),
    "tax": _words(
        "tax, vat, sales tax, gst, tax amount, mwst, mwst., ust, ust., umsatzsteuer, "
        "mehrwertsteuer, tva, montant tva, iva, i.v.a., igic"
    ),
    "due": _words(
        "due, due date, due on, payable by, payable on, pay by, payment due, fällig, fällig "
        "am, fällig bis, zahlbar bis, fälligkeit, fälligkeitsdatum, zahlungsziel, échéance, "
        "date d'échéance, à payer avant le, payable avant le, à régler avant le, vencimiento, "
        "fecha de vencimiento, pagadero antes del, a pagar antes del, scadenza, data di "
        "scadenza, da pagare entro il, pagabile entro il"
    ),
    "delivery": _words(
        "delivery, delivery date, deliver by, ship date, lieferdatum, liefertermin, "
        "lieferung, lieferung bis, livraison, date de livraison, livrer avant le, entrega, "
        "fecha de entrega, consegna, data di consegna, consegna entro il"
    ),
    "issued": _words(
        "invoice date, date of issue, issue date, issued, issued on, dated, rechnungsdatum, "
        "ausgestellt am, date de facture, date d'émission, émise le, fecha de factura, fecha "
        "de emisión, data fattura, data di emissione"
    ),
    "ordered": _words(
        "order date, date of order, bestelldatum, date de commande, fecha de pedido, fecha "
        "del pedido, data ordine, data dell'ordine"
    ),
    "date": _words("date, datum, fecha, data"),
    "number": _words(
        "invoice, invoice no, invoice number, invoice #, rechnung, rechnung nr, "
        "rechnungsnummer, rechnungs-nr, facture, facture n°, numéro de facture, factura, "
        "factura n.º, factura nº, número de factura, fattura, fattura n., numero fattura, "
        "purchase order, po, po number, po no, order no, order number, bestellung, "
        "bestellnummer, bestell-nr, auftragsnummer, bon de commande, commande n°, numéro de "
        "commande, pedido, pedido n.º, número de pedido, orden de compra, ordine, numero "
        "ordine, ordine n., nr, no, n°, nº"
    ),
    "seller": _words(
        "from:, seller, vendor, supplier, issued by, bill from, verkäufer, lieferant, "
        "anbieter, rechnungssteller, von:, vendeur, fournisseur, émetteur, de:, vendedor, "
        "proveedor, emisor, venditore, fornitore, emittente, da:"
    ),
    "buyer": _words(
        "bill to, billed to, invoice to, sold to, ship to, buyer, customer, client, ordered "
        "by, to:, kunde, käufer, rechnungsempfänger, auftraggeber, besteller, an:, acheteur, "
        "facturé à, commandé par, cliente, comprador, facturar a, facturado a, acquirente, "
        "committente, intestata a, intestato a, ordinato da, spett.le"
    ),
    "recipient": _words(
        "to:, recipient, an:, empfänger, à:, destinataire, para:, destinatario, a:"
    ),
    "sender": _words("from:, sender, von:, absender, de:, expéditeur, remitente, da:, mittente"),
    "phone": _words(
        "phone, tel, tel., telephone, mobile, cell, telefon, handy, mobil, téléphone, tél, "
        "tél., portable, teléfono, tfno, móvil, telefono, cellulare, cell."
    ),
    "subject": _words(
        "subject, re:, regarding, betreff, betr., objet, asunto, ref., oggetto, ogg."
    ),
    "birth": _words(
        "date of birth, born, birth date, dob, geboren, geboren am, geburtsdatum, geb., né "
        "le, née le, date de naissance, fecha de nacimiento, nacido el, nacida el, nato il, "
        "nata il, data di nascita"
    ),
    "title": _words(
        "receipt, kassenbon, quittung, beleg, reçu, ticket, recibo, scontrino, ricevuta, "
        "curriculum vitae, cv, lebenslauf, resume, résumé"
    ),
}

# a field name (or a run of its words) -> the concepts whose labels name its value, best first
FIELDS: dict[str, tuple[str, ...]] = {
    "total": ("total",), "amount_due": ("total",), "grand_total": ("total",),
    "total_amount": ("total",), "subtotal": ("subtotal",), "tax": ("tax",), "vat": ("tax",),
    "tax_amount": ("tax",), "due_date": ("due",), "delivery_date": ("delivery",),
    "issue_date": ("issued", "date"), "invoice_date": ("issued", "date"),
    "order_date": ("ordered", "date"), "invoice_number": ("number",), "po_number": ("number",),
    "order_number": ("number",), "seller": ("seller",), "vendor": ("seller",),
    "supplier": ("seller",), "merchant": ("seller",), "buyer": ("buyer",),
    "customer": ("buyer",), "sender": ("sender",), "recipient": ("recipient",),
    "phone": ("phone",), "telephone": ("phone",), "subject": ("subject",),
    "date_of_birth": ("birth",), "birth_date": ("birth",),
}  # fmt: skip

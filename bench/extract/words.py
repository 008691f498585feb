"""The labels documents print, per language (for ``corpus.py``)."""

from __future__ import annotations

WORDS: dict[str, dict[str, list[str]]] = {
    "en": {
        "invoice": ["INVOICE", "Invoice", "Tax Invoice"],
        "inv_no": ["Invoice No.", "Invoice number", "Invoice #"],
        "date": ["Date", "Invoice date", "Issued"],
        "due": ["Due date", "Payment due", "Due by"],
        "from": ["From", "Supplier", "Issued by"],
        "to": ["Bill to", "Customer", "Billed to"],
        "desc": ["Description"], "qty": ["Qty"], "amount": ["Amount"],
        "subtotal": ["Subtotal"], "tax": ["VAT 20%", "Sales tax", "Tax"],
        "total": ["Total due", "TOTAL", "Amount due", "Total"],
        "po": ["PURCHASE ORDER", "Purchase Order"], "po_no": ["PO number", "Order No."],
        "order_date": ["Order date", "Date"], "delivery": ["Delivery date", "Deliver by"],
        "supplier": ["Supplier", "Vendor"], "buyer": ["Ordered by", "Buyer", "Ship to"],
        "receipt": ["RECEIPT", "Sales receipt", "Thank you for shopping"],
        "paid": {"cash": "Paid cash", "card": "Card payment", "mobile": "Paid by Apple Pay"},
        "subject": ["Re:", "Subject:"], "dear": ["Dear {r},", "Dear Sir or Madam,"],
        "regards": ["Kind regards,", "Yours sincerely,", "Best regards,"],
        "cv": ["Curriculum Vitae", "CV", "Résumé"], "born": ["Date of birth", "Born"],
        "phone": ["Phone", "Tel.", "Mobile"], "email": ["Email", "E-mail"],
        "address": ["Address", "Lives in"], "experience": ["Experience", "Work history"],
        "since": ["{y} - present", "{y} - today"],
    },
    "de": {
        "invoice": ["RECHNUNG", "Rechnung"],
        "inv_no": ["Rechnungsnummer", "Rechnung Nr.", "Rechnungs-Nr."],
        "date": ["Rechnungsdatum", "Datum"],
        "due": ["Fällig am", "Zahlbar bis", "Zahlungsziel"],
        "from": ["Von", "Rechnungssteller", "Absender"],
        "to": ["An", "Rechnungsempfänger", "Kunde"],
        "desc": ["Beschreibung", "Leistung"], "qty": ["Menge"], "amount": ["Betrag"],
        "subtotal": ["Zwischensumme", "Netto"], "tax": ["MwSt. 19%", "USt. 19%"],
        "total": ["Gesamtbetrag", "Summe", "Rechnungsbetrag", "Gesamt"],
        "po": ["BESTELLUNG", "Bestellung"], "po_no": ["Bestellnummer", "Bestell-Nr."],
        "order_date": ["Bestelldatum", "Datum"], "delivery": ["Liefertermin", "Lieferung bis"],
        "supplier": ["Lieferant"], "buyer": ["Besteller", "Auftraggeber"],
        "receipt": ["KASSENBON", "Quittung", "Vielen Dank für Ihren Einkauf"],
        "paid": {"cash": "Bar bezahlt", "card": "Kartenzahlung", "mobile": "Bezahlt mit Google Pay"},
        "subject": ["Betreff:", "Betr.:"], "dear": ["Sehr geehrte Damen und Herren,", "Liebe/r {r},"],
        "regards": ["Mit freundlichen Grüßen", "Viele Grüße"],
        "cv": ["Lebenslauf"], "born": ["Geburtsdatum", "Geboren am"],
        "phone": ["Telefon", "Tel.", "Mobil"], "email": ["E-Mail"],
        "address": ["Wohnort", "Anschrift"], "experience": ["Berufserfahrung"],
        "since": ["seit {y}", "{y} - heute"],
    },
    "fr": {
        "invoice": ["FACTURE", "Facture"],
        "inv_no": ["N° de facture", "Facture n°", "Numéro de facture"],
        "date": ["Date", "Date de facture", "Émise le"],
        "due": ["Échéance", "Date d'échéance", "À payer avant le"],
        "from": ["Émetteur", "Vendeur", "De"],
        "to": ["Client", "Facturé à", "Destinataire"],
        "desc": ["Désignation"], "qty": ["Qté"], "amount": ["Montant"],
        "subtotal": ["Total HT", "Sous-total"], "tax": ["TVA 20 %", "TVA 20%"],
        "total": ["Total TTC", "Montant total", "Net à payer", "Total"],
        "po": ["BON DE COMMANDE", "Bon de commande"], "po_no": ["Commande n°", "N° de commande"],
        "order_date": ["Date de commande", "Date"], "delivery": ["Livraison prévue", "Date de livraison"],
        "supplier": ["Fournisseur"], "buyer": ["Client", "Commandé par"],
        "receipt": ["TICKET DE CAISSE", "Reçu", "Merci de votre visite"],
        "paid": {"cash": "Payé en espèces", "card": "Paiement CB", "mobile": "Payé par mobile"},
        "subject": ["Objet :", "Objet:"], "dear": ["Madame, Monsieur,", "Chère {r},"],
        "regards": ["Cordialement,", "Bien à vous,"],
        "cv": ["Curriculum vitae", "CV"], "born": ["Date de naissance", "Né(e) le"],
        "phone": ["Téléphone", "Tél."], "email": ["E-mail", "Courriel"],
        "address": ["Adresse", "Ville"], "experience": ["Expérience professionnelle"],
        "since": ["depuis {y}", "{y} - aujourd'hui"],
    },
    "es": {
        "invoice": ["FACTURA", "Factura"],
        "inv_no": ["Número de factura", "Factura n.º", "Nº factura"],
        "date": ["Fecha", "Fecha de emisión"],
        "due": ["Vencimiento", "Fecha de vencimiento"],
        "from": ["Emisor", "De", "Proveedor"],
        "to": ["Cliente", "Facturar a"],
        "desc": ["Concepto", "Descripción"], "qty": ["Cant."], "amount": ["Importe"],
        "subtotal": ["Base imponible", "Subtotal"], "tax": ["IVA 21%", "IVA (21%)"],
        "total": ["Total", "Importe total", "Total a pagar"],
        "po": ["ORDEN DE COMPRA", "Pedido"], "po_no": ["Nº de pedido", "Pedido n.º"],
        "order_date": ["Fecha del pedido", "Fecha"], "delivery": ["Fecha de entrega", "Entrega"],
        "supplier": ["Proveedor"], "buyer": ["Comprador", "Solicitado por"],
        "receipt": ["TICKET", "Recibo", "Gracias por su compra"],
        "paid": {"cash": "Pago en efectivo", "card": "Pago con tarjeta", "mobile": "Pago móvil"},
        "subject": ["Asunto:", "Ref.:"], "dear": ["Estimados señores:", "Estimada {r}:"],
        "regards": ["Atentamente,", "Un cordial saludo,"],
        "cv": ["Currículum Vitae", "CV"], "born": ["Fecha de nacimiento", "Nacido el"],
        "phone": ["Teléfono", "Tel.", "Móvil"], "email": ["Correo electrónico", "Email"],
        "address": ["Ciudad", "Dirección"], "experience": ["Experiencia profesional"],
        "since": ["desde {y}", "{y} - actualidad"],
    },
    "it": {
        "invoice": ["FATTURA", "Fattura"],
        "inv_no": ["Numero fattura", "Fattura n.", "N. fattura"],
        "date": ["Data", "Data fattura", "Data di emissione"],
        "due": ["Scadenza", "Data di scadenza"],
        "from": ["Emittente", "Da", "Fornitore"],
        "to": ["Cliente", "Intestata a", "Destinatario"],
        "desc": ["Descrizione"], "qty": ["Q.tà"], "amount": ["Importo"],
        "subtotal": ["Imponibile", "Subtotale"], "tax": ["IVA 22%", "IVA (22%)"],
        "total": ["Totale", "Totale da pagare", "Totale fattura"],
        "po": ["ORDINE DI ACQUISTO", "Ordine"], "po_no": ["Ordine n.", "Numero ordine"],
        "order_date": ["Data ordine", "Data"], "delivery": ["Data di consegna", "Consegna entro"],
        "supplier": ["Fornitore"], "buyer": ["Cliente", "Ordinato da"],
        "receipt": ["SCONTRINO", "Ricevuta", "Grazie e arrivederci"],
        "paid": {"cash": "Pagato in contanti", "card": "Pagamento con carta", "mobile": "Pagato con smartphone"},
        "subject": ["Oggetto:", "Ogg.:"], "dear": ["Gentili Signori,", "Gentile {r},"],
        "regards": ["Cordiali saluti,", "Distinti saluti,"],
        "cv": ["Curriculum Vitae", "CV"], "born": ["Data di nascita", "Nato il"],
        "phone": ["Telefono", "Tel.", "Cellulare"], "email": ["E-mail", "Email"],
        "address": ["Città", "Residenza"], "experience": ["Esperienza professionale"],
        "since": ["dal {y}", "{y} - oggi"],
    },
}  # fmt: skip

PROSE = {
    "en": "Please find below our invoice {no} dated {date} for the work carried out{buyer}. "
    "The total amount of {total} is payable{due}.",
    "de": "anbei erhalten Sie unsere Rechnung {no} vom {date} für die erbrachten Leistungen{buyer}. "
    "Der Gesamtbetrag von {total} ist{due} zu zahlen.",
    "fr": "veuillez trouver ci-dessous notre facture {no} du {date} pour les travaux réalisés"
    "{buyer}. Le montant total de {total} est à régler{due}.",
    "es": "le adjuntamos nuestra factura {no} con fecha {date} por los trabajos realizados"
    "{buyer}. El importe total de {total} debe abonarse{due}.",
    "it": "in allegato la nostra fattura {no} del {date} per i lavori svolti{buyer}. "
    "L'importo totale di {total} è da saldare{due}.",
}
PROSE_BUYER = {"en": " for {b}", "de": " an {b}", "fr": " pour {b}", "es": " para {b}",
               "it": " per {b}"}  # fmt: skip
STREETS = {"en": "{n} High Street", "de": "Hauptstraße {n}", "fr": "{n} rue de la Paix",
           "es": "Calle Mayor {n}", "it": "Via Roma {n}"}  # fmt: skip
PROSE_DUE = {"en": " by {d}", "de": " bis zum {d}", "fr": " avant le {d}", "es": " antes del {d}",
             "it": " entro il {d}"}  # fmt: skip
LETTER_BODY = {
    "en": "Thank you for your letter. We confirm the meeting and will send the documents next week.",
    "de": "vielen Dank für Ihr Schreiben. Wir bestätigen den Termin und senden die Unterlagen "
    "nächste Woche.",
    "fr": "nous vous remercions de votre courrier. Nous confirmons le rendez-vous et vous "
    "enverrons les documents la semaine prochaine.",
    "es": "le agradecemos su carta. Confirmamos la reunión y le enviaremos los documentos la "
    "próxima semana.",
    "it": "La ringraziamo per la Sua lettera. Confermiamo l'appuntamento e invieremo i documenti "
    "la prossima settimana.",
}
SUBJECTS = {
    "en": ["Contract renewal", "Change of address", "Your complaint of last month", "Meeting on site"],
    "de": ["Vertragsverlängerung", "Adressänderung", "Ihre Reklamation", "Termin vor Ort"],
    "fr": ["Renouvellement du contrat", "Changement d'adresse", "Votre réclamation", "Rendez-vous"],
    "es": ["Renovación del contrato", "Cambio de domicilio", "Su reclamación", "Reunión"],
    "it": ["Rinnovo del contratto", "Cambio di indirizzo", "Il Suo reclamo", "Sopralluogo"],
}  # fmt: skip

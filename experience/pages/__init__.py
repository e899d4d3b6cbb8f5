"""The console's experience pages, one module per subject: the item views, written once for every
kind (``items``: detail, live checklist, review, revocation) over a description per kind
(``cases``, ``skills``, ``lessons``); the review queue (``queue``); revocation and its impact
(``revocation``); lesson conflicts (``conflicts``); runs and their outcomes (``runs``,
``outcomes``); what they share (``checklists``, ``availability``, ``forms``, ``sentences``,
``titles``) and their reads (``selectors``)."""

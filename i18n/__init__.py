"""Interface languages: the messages, their gettext catalogs (`i18n/locales`), the
languages offered and the labels of exported documents; every edge uses them."""

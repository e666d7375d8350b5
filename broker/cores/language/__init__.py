"""The content-based language of the SCOT broker mode (OctopiA §1-§2, §6-§9).

OctopiA is an advertisement-based publish/subscribe system: a publisher first announces what it
will publish (an *advertisement*), a subscriber states what it wants (a *subscription*), and
brokers route a *publication* towards subscriptions it *matches*; advertisements and
subscriptions are related by *overlap* (PADRES and SIENA use the same vocabulary).  The paper
does not fix a language; this package defines a small, exact one, one job per module (import
the names from them; this package re-exports nothing):

- `broker.cores.language.values`: the value domain (str, int64, finite float), its kinds, the
  limits, `FilterError`, and the validation of names, values and publications;
- `broker.cores.language.predicates`: one predicate ``attr op value`` (`Predicate`);
- `broker.cores.language.filters`: conjunctions of predicates (`Filter`), used as
  advertisements and as subscriptions, with their wire form;
- `broker.cores.language.satisfiability`: the exact decision whether predicates can hold together;
- `broker.cores.language.relations`: overlap, intersection and covering between filters;
- `broker.cores.language.text`: the text forms of filters and publications (`parse_filter`,
  `parse_attrs`, `attrs_from_json`, `attrs_to_text`).
"""

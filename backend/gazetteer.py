"""Names of countries and of US states, for telling what kind of place an answer names
(backend.answer_kind). Countries include the historical states and the UK's four countries that
HotpotQA's answers name ("Soviet Union", "England"); a few names are both ("Georgia")."""

from __future__ import annotations

import re

COUNTRIES = frozenset("""
Afghanistan|Albania|Algeria|Andorra|Angola|Antigua and Barbuda|Argentina|Armenia|Australia|Austria|Azerbaijan|
Bahamas|The Bahamas|Bahrain|Bangladesh|Barbados|Belarus|Belgium|Belize|Benin|Bhutan|Bolivia|Bosnia and Herzegovina|
Bosnia|Botswana|Brazil|Brunei|Bulgaria|Burkina Faso|Burundi|Cambodia|Cameroon|Canada|Cape Verde|Cabo Verde|
Central African Republic|Chad|Chile|China|People's Republic of China|Republic of China|Colombia|Comoros|Congo|
Republic of the Congo|Democratic Republic of the Congo|DR Congo|Costa Rica|Ivory Coast|Côte d'Ivoire|Croatia|Cuba|
Cyprus|Czech Republic|Czechia|Denmark|Djibouti|Dominica|Dominican Republic|East Timor|Timor-Leste|Ecuador|Egypt|
El Salvador|Equatorial Guinea|Eritrea|Estonia|Eswatini|Swaziland|Ethiopia|Fiji|Finland|France|Gabon|Gambia|
The Gambia|Georgia|Germany|Ghana|Greece|Grenada|Guatemala|Guinea|Guinea-Bissau|Guyana|Haiti|Honduras|Hungary|
Iceland|India|Indonesia|Iran|Iraq|Ireland|Republic of Ireland|Israel|Italy|Jamaica|Japan|Jordan|Kazakhstan|Kenya|
Kiribati|Kosovo|Kuwait|Kyrgyzstan|Laos|Latvia|Lebanon|Lesotho|Liberia|Libya|Liechtenstein|Lithuania|Luxembourg|
Madagascar|Malawi|Malaysia|Maldives|Mali|Malta|Marshall Islands|Mauritania|Mauritius|Mexico|Micronesia|Moldova|
Monaco|Mongolia|Montenegro|Morocco|Mozambique|Myanmar|Burma|Namibia|Nauru|Nepal|Netherlands|The Netherlands|Holland|
New Zealand|Nicaragua|Niger|Nigeria|North Korea|North Macedonia|Macedonia|Norway|Oman|Pakistan|Palau|Palestine|
Panama|Papua New Guinea|Paraguay|Peru|Philippines|The Philippines|Poland|Portugal|Qatar|Romania|Russia|
Russian Federation|Rwanda|Saint Kitts and Nevis|Saint Lucia|Saint Vincent and the Grenadines|Samoa|San Marino|
São Tomé and Príncipe|Saudi Arabia|Senegal|Serbia|Seychelles|Sierra Leone|Singapore|Slovakia|Slovenia|
Solomon Islands|Somalia|South Africa|South Korea|Korea|South Sudan|Spain|Sri Lanka|Sudan|Suriname|Sweden|
Switzerland|Syria|Taiwan|Tajikistan|Tanzania|Thailand|Togo|Tonga|Trinidad and Tobago|Tunisia|Turkey|Türkiye|
Turkmenistan|Tuvalu|Uganda|Ukraine|United Arab Emirates|UAE|United Kingdom|UK|U.K.|Great Britain|Britain|
United States|United States of America|USA|U.S.A.|US|U.S.|America|Uruguay|Uzbekistan|Vanuatu|Vatican City|
Holy See|Venezuela|Vietnam|Viet Nam|Yemen|Zambia|Zimbabwe|
England|Scotland|Wales|Northern Ireland|Greenland|Faroe Islands|Puerto Rico|Hong Kong|Macau|
Soviet Union|USSR|Czechoslovakia|Yugoslavia|East Germany|West Germany|Prussia|Ottoman Empire|Persia|Ceylon|Siam|
Rhodesia|Zaire|Austria-Hungary|Kingdom of Great Britain|Roman Empire|Byzantine Empire|Holy Roman Empire
""".replace("\n", "").split("|")) - {""}

US_STATES = frozenset("""
Alabama|Alaska|Arizona|Arkansas|California|Colorado|Connecticut|Delaware|Florida|Georgia|Hawaii|Idaho|Illinois|
Indiana|Iowa|Kansas|Kentucky|Louisiana|Maine|Maryland|Massachusetts|Michigan|Minnesota|Mississippi|Missouri|
Montana|Nebraska|Nevada|New Hampshire|New Jersey|New Mexico|New York|North Carolina|North Dakota|Ohio|Oklahoma|
Oregon|Pennsylvania|Rhode Island|South Carolina|South Dakota|Tennessee|Texas|Utah|Vermont|Virginia|Washington|
West Virginia|Wisconsin|Wyoming
""".replace("\n", "").split("|")) - {""}

# Named for its state as much as for a city of the same name: a city answer that is one of these is no mistake.
ALSO_CITIES = frozenset({"New York", "Washington", "Singapore", "Monaco", "Luxembourg", "Djibouti", "Kuwait",
                         "Panama", "Guatemala", "Mexico", "Vatican City", "San Marino", "Hong Kong", "Macau",
                         "Georgia"})


def _key(name: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"^the\s+", "", name.strip().strip(".,;:"), flags=re.IGNORECASE)).casefold()


_COUNTRY_KEYS = {_key(name): name for name in COUNTRIES}
_STATE_KEYS = {_key(name): name for name in US_STATES}


def is_country(name: str) -> bool:
    return _key(name) in _COUNTRY_KEYS


def is_us_state(name: str) -> bool:
    return _key(name) in _STATE_KEYS


def is_also_a_city(name: str) -> bool:
    return _key(name) in {_key(n) for n in ALSO_CITIES}


def _named(names: dict[str, str], text: str) -> list[str]:
    """The names of `names` that `text` holds as whole words, longest first, each once."""
    found = []
    for key, name in sorted(names.items(), key=lambda item: -len(item[0])):
        pattern = r"(?<![\w.])" + re.escape(name) + r"(?![\w])"
        flags = 0 if len(name) <= 4 else re.IGNORECASE  # "US" is not "us"
        inside_longer = any(re.search(rf"\b{re.escape(key)}\b", _key(longer)) for longer in found)
        if not inside_longer and re.search(pattern, text, flags):
            found.append(name)
    return found


def countries_in(text: str) -> list[str]:
    """The countries `text` names, longest name first ("United States" before "US")."""
    return _named(_COUNTRY_KEYS, text)


def states_in(text: str) -> list[str]:
    return _named(_STATE_KEYS, text)

//! The languages the waiting page speaks, and how a visitor's browser or choice picks one. Both
//! the sentence table and the server-rendered page depend on this; it depends on neither.

/// A language the page's server-rendered sentences exist in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locale {
    En,
    Th,
}

impl Locale {
    /// The best locale for an `Accept-Language` header: the first language by weight that the
    /// page speaks, English when none is.
    pub fn from_accept_language(header: Option<&str>) -> Locale {
        let Some(header) = header else {
            return Locale::En;
        };
        let mut ranges: Vec<(f32, usize, &str)> = header
            .split(',')
            .enumerate()
            .filter_map(|(index, item)| {
                let mut parts = item.split(';');
                let range = parts.next()?.trim();
                let weight = parts
                    .filter_map(|parameter| parameter.trim().strip_prefix("q="))
                    .find_map(|value| value.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                (!range.is_empty() && weight > 0.0).then_some((weight, index, range))
            })
            .collect();
        // Highest weight first; equal weights keep the order the browser sent.
        ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranges
            .into_iter()
            .find_map(|(_, _, range)| {
                let primary = range.split(['-', '_']).next().unwrap_or(range);
                if primary.eq_ignore_ascii_case("th") {
                    Some(Locale::Th)
                } else if primary.eq_ignore_ascii_case("en") {
                    Some(Locale::En)
                } else {
                    None
                }
            })
            .unwrap_or(Locale::En)
    }

    /// A locale by its tag (`?lang=th`, the `qm_lang` cookie): only the exact tags it speaks.
    pub fn from_tag(tag: &str) -> Option<Locale> {
        match tag.trim() {
            "en" => Some(Locale::En),
            "th" => Some(Locale::Th),
            _ => None,
        }
    }

    /// Every locale, in the order the switch lists them.
    pub const ALL: [Locale; 2] = [Locale::En, Locale::Th];

    /// The language's name in itself, as the switch shows it.
    pub fn native_name(self) -> &'static str {
        match self {
            Locale::En => "English",
            Locale::Th => "ไทย",
        }
    }

    /// The `lang` attribute value.
    pub fn tag(self) -> &'static str {
        match self {
            Locale::En => "en",
            Locale::Th => "th",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_picks_the_first_spoken_language_by_weight() {
        assert_eq!(Locale::from_accept_language(None), Locale::En);
        assert_eq!(
            Locale::from_accept_language(Some("th-TH,th;q=0.9,en;q=0.8")),
            Locale::Th
        );
        assert_eq!(
            Locale::from_accept_language(Some("en-GB,th;q=0.5")),
            Locale::En
        );
        assert_eq!(
            Locale::from_accept_language(Some("de, th;q=0.7, en;q=0.3")),
            Locale::Th
        );
        assert_eq!(
            Locale::from_accept_language(Some("en;q=0.2, TH;q=0.9")),
            Locale::Th
        );
        assert_eq!(Locale::from_accept_language(Some("fr, de")), Locale::En);
        assert_eq!(Locale::from_accept_language(Some("th;q=0, en")), Locale::En);
        assert_eq!(Locale::from_accept_language(Some(";;,,")), Locale::En);
    }

    #[test]
    fn tags_name_only_the_spoken_locales() {
        assert_eq!(Locale::from_tag("th"), Some(Locale::Th));
        assert_eq!(Locale::from_tag("en"), Some(Locale::En));
        assert_eq!(Locale::from_tag("TH-th"), None);
        assert_eq!(Locale::from_tag("de"), None);
    }
}

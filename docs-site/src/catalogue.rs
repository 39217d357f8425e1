//! Which guides the server serves, under which names, and which of them exist in Thai. The
//! sources are `docs/` of this repository, embedded at build time.

use qm_web::html::escape_html;

use crate::Locale;

/// How a source file is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SourceFormat {
    Markdown,
    /// The spec: plain text, `•` bullets (see `plain.rs`).
    PlainSpec,
}

/// How much of a guide `docs/th/` holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Translation {
    Complete,
    /// Some sections; the page says so and links the English original.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "every translated guide is whole today; the pages still serve a partial one"
        )
    )]
    Partial,
}

#[derive(Debug)]
pub(crate) struct ThaiGuide {
    pub(crate) source: &'static str,
    pub(crate) completeness: Translation,
}

#[derive(Debug)]
pub(crate) struct Guide {
    /// The name in the URL: `/docs/<slug>`.
    pub(crate) slug: &'static str,
    /// The file in `docs/`, also accepted as a name.
    pub(crate) file: &'static str,
    /// Other names a reader may type.
    pub(crate) aliases: &'static [&'static str],
    pub(crate) format: SourceFormat,
    pub(crate) source: &'static str,
    pub(crate) thai: Option<ThaiGuide>,
    pub(crate) title_en: &'static str,
    pub(crate) title_th: &'static str,
    pub(crate) summary_en: &'static str,
    pub(crate) summary_th: &'static str,
}

pub(crate) static GUIDES: [Guide; 5] = [
    Guide {
        slug: "integration",
        file: "INTEGRATION.md",
        aliases: &[],
        format: SourceFormat::Markdown,
        source: include_str!("../../docs/INTEGRATION.md"),
        thai: Some(ThaiGuide {
            source: include_str!("../../docs/th/INTEGRATION.md"),
            completeness: Translation::Complete,
        }),
        title_en: "Integrating Queue Manager",
        title_th: "การเชื่อมต่อกับ Queue Manager",
        summary_en: "For the engineers wiring a site to Queue Manager: the visitor API, the door check, \
                     cookies and tokens, and every error code a client can meet.",
        summary_th: "สำหรับวิศวกรที่ต่อเว็บไซต์เข้ากับ Queue Manager: API ฝั่งผู้เข้าชม การตรวจที่ประตู \
                     คุกกี้และโทเค็น และรหัสข้อผิดพลาดทุกตัวที่ไคลเอนต์อาจพบ",
    },
    Guide {
        slug: "operations",
        file: "OPERATIONS.md",
        aliases: &["ops"],
        format: SourceFormat::Markdown,
        source: include_str!("../../docs/OPERATIONS.md"),
        thai: Some(ThaiGuide {
            source: include_str!("../../docs/th/OPERATIONS.md"),
            completeness: Translation::Complete,
        }),
        title_en: "Operating Queue Manager",
        title_th: "การดูแลระบบ Queue Manager",
        summary_en: "For the people who deploy and run Queue Manager: processes, readiness, keys, \
                     client identity, the stores, rebuilds and several engines.",
        summary_th: "สำหรับผู้ที่ติดตั้งและดูแล Queue Manager: โปรเซส ความพร้อมให้บริการ คีย์ \
                     การระบุตัวไคลเอนต์ ที่เก็บข้อมูล การสร้างข้อมูลใหม่จากบันทึก และการรัน engine หลายตัว",
    },
    Guide {
        slug: "progress",
        file: "PROGRESS.md",
        aliases: &[],
        format: SourceFormat::Markdown,
        source: include_str!("../../docs/PROGRESS.md"),
        thai: None,
        title_en: "Progress",
        title_th: "ความคืบหน้า",
        summary_en: "Every feature of the contract, its honest state (done, partial, not started) \
                     and the test that proves it.",
        summary_th: "ทุกฟีเจอร์ในสัญญา สถานะตามจริง (เสร็จแล้ว ทำบางส่วน ยังไม่เริ่ม) \
                     และการทดสอบที่พิสูจน์สถานะนั้น",
    },
    Guide {
        slug: "benchmarks",
        file: "BENCHMARKS.md",
        aliases: &["bench"],
        format: SourceFormat::Markdown,
        source: include_str!("../../docs/BENCHMARKS.md"),
        thai: Some(ThaiGuide {
            source: include_str!("../../docs/th/BENCHMARKS.md"),
            completeness: Translation::Complete,
        }),
        title_en: "Benchmarks",
        title_th: "ผลการวัดประสิทธิภาพ",
        summary_en: "What qm-bench measures, how, and the figures, each beside a ceiling measured \
                     in the same run.",
        summary_th: "สิ่งที่ qm-bench วัด วิธีวัด และตัวเลขที่ได้ \
                     โดยแต่ละตัวเลขแสดงคู่กับเพดานที่วัดในการรันครั้งเดียวกัน",
    },
    Guide {
        slug: "spec",
        file: "SPEC.md",
        aliases: &["queue-manager-spec", "queue-manager-spec.txt", "contract"],
        format: SourceFormat::PlainSpec,
        source: include_str!("../../docs/SPEC.md"),
        thai: None,
        title_en: "Product spec (contract)",
        title_th: "ข้อกำหนดผลิตภัณฑ์ (สัญญา)",
        summary_en: "The contract: routes, JSON shapes, error codes, cookies, tokens, SSE frames \
                     and environment variables.",
        summary_th: "สัญญาของผลิตภัณฑ์: เส้นทาง รูปแบบ JSON รหัสข้อผิดพลาด คุกกี้ โทเค็น \
                     เฟรม SSE และตัวแปรสภาพแวดล้อม",
    },
];

/// The Thai overview above the Thai index's list of guides.
pub(crate) const THAI_OVERVIEW: &str = include_str!("../../docs/th/README.md");

/// The English index's opening, above the list of guides.
pub(crate) const ENGLISH_OVERVIEW_HTML: &str = "<h1 id=\"queue-manager-documentation\">Queue Manager documentation</h1>\n\
<p>Queue Manager is a virtual waiting room: when more visitors arrive than a site can serve, \
they wait in a fair first-come, first-served line and are let through at the rate its operators \
set. It runs as three processes that talk gRPC: the <strong>engine</strong> holds every room and \
line, the <strong>gateway</strong> serves visitors (<code>/api/join</code>, <code>/api/status</code>, \
<code>/api/events</code>, <code>/api/check</code>, the waiting page <code>/w/:roomId</code>), and the \
<strong>admin</strong> process serves operators (<code>/api/admin/*</code>) and these pages.</p>\n\
<p>Start with the <a href=\"/docs/integration\">integration guide</a> to send a site's visitors \
through a room, and the <a href=\"/docs/operations\">operations guide</a> to run it. The \
<a href=\"/docs/spec\">spec</a> is the contract both are written against.</p>\n";

impl Guide {
    /// Whether a reader's `name` means this guide: slug, file name or alias, any case, with or
    /// without `.md`.
    pub(crate) fn answers_to(&self, name: &str) -> bool {
        let name = name.trim();
        let stem = strip_suffix_ignore_case(name, ".md").unwrap_or(name);
        self.slug.eq_ignore_ascii_case(stem)
            || self.file.eq_ignore_ascii_case(name)
            || self
                .aliases
                .iter()
                .any(|alias| alias.eq_ignore_ascii_case(name) || alias.eq_ignore_ascii_case(stem))
    }

    pub(crate) fn index_entry(&self, locale: Locale) -> (&'static str, &'static str) {
        match locale {
            Locale::En => (self.title_en, self.summary_en),
            Locale::Th => (self.title_th, self.summary_th),
        }
    }

    /// The translation state as the Thai index shows it.
    pub(crate) fn thai_status(&self) -> &'static str {
        match &self.thai {
            Some(ThaiGuide {
                completeness: Translation::Complete,
                ..
            }) => "แปลแล้ว",
            Some(ThaiGuide {
                completeness: Translation::Partial,
                ..
            }) => "แปลบางส่วน",
            None => "ยังไม่ได้แปล: แสดงฉบับภาษาอังกฤษ",
        }
    }

    /// What a reader must know before this guide's text (the spec's superseded Stack section).
    pub(crate) fn notice(&self, locale: Locale) -> String {
        if self.format != SourceFormat::PlainSpec {
            return String::new();
        }
        let design = match locale {
            Locale::En => {
                "This is the product's contract, served exactly as written. Its \
                           <em>Stack</em> section describes an earlier single-process Node.js \
                           build and is superseded: Queue Manager is Rust, three processes \
                           (engine, gateway, admin) that talk gRPC. Everything else in it is \
                           normative."
            }
            Locale::Th => {
                "นี่คือสัญญาของผลิตภัณฑ์ แสดงตามต้นฉบับทุกคำ ส่วน <em>Stack</em> \
                           อธิบายรุ่นก่อนหน้าที่เป็นโปรเซสเดียวบน Node.js และถูกแทนที่แล้ว: \
                           Queue Manager เขียนด้วย Rust แยกเป็นสามโปรเซส (engine, gateway, admin) \
                           ที่คุยกันผ่าน gRPC ส่วนอื่นทั้งหมดยังมีผลบังคับ"
            }
        };
        format!(
            "<aside class=\"notice\" role=\"note\" lang=\"{}\"><p>{design}</p></aside>\n",
            locale.tag()
        )
    }
}

fn strip_suffix_ignore_case<'a>(text: &'a str, suffix: &str) -> Option<&'a str> {
    let split = text.len().checked_sub(suffix.len())?;
    let tail = text.get(split..)?;
    tail.eq_ignore_ascii_case(suffix).then(|| &text[..split])
}

/// Above an English guide shown on a Thai page.
pub(crate) fn thai_missing_notice(english_href: &str) -> String {
    format!(
        "<aside class=\"notice notice-translation\" role=\"note\" lang=\"th\">\
         <p><strong>ยังไม่มีคำแปลภาษาไทย</strong> — คู่มือนี้ยังไม่ได้แปลเป็นภาษาไทย \
         เนื้อหาด้านล่างเป็นฉบับภาษาอังกฤษ</p>\
         <p><a href=\"{href}\" hreflang=\"en\">เปิดหน้านี้ในฉบับภาษาอังกฤษ (English)</a></p></aside>\n",
        href = escape_html(english_href)
    )
}

/// Above a Thai guide that translates only some sections.
pub(crate) fn thai_partial_notice(english_href: &str) -> String {
    format!(
        "<aside class=\"notice notice-translation\" role=\"note\" lang=\"th\">\
         <p><strong>แปลบางส่วน</strong> — หน้านี้แปลเฉพาะส่วนต้นของคู่มือ \
         ฉบับภาษาอังกฤษเป็นฉบับหลักและมีครบทุกหัวข้อ</p>\
         <p><a href=\"{href}\" hreflang=\"en\">อ่านฉบับเต็มภาษาอังกฤษ (English)</a></p></aside>\n",
        href = escape_html(english_href)
    )
}

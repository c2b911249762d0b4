//! Images in a request body, as the simulated server reads them: each chat content part of type
//! `image_url` (OpenAI's form, `{"image_url": {"url": ...}}` or the URL as a string), or a
//! pooling body's `input` of modality image (Infinity's form), is sized
//! from the JPEG or PNG header of its `data:` URL or of the local file a `file://` URL names
//! (what vLLM's `custom_image` dataset sends), without decoding the picture, and turned into
//! the tower's work and prompt tokens by the model's [`Vision`]. Remote URLs are not fetched:
//! the twin has no network, so such a request is refused with what to send instead.

use std::hash::{Hash, Hasher};

use base64::Engine;
use serde_json::Value;
use servebench_core::config::Api;

use crate::engine::EncoderInput;
use crate::model::{ImageWork, Vision};
use crate::rng::mix64;

/// The CPU time, per pixel, the API server spends on an image before the engine sees the
/// request: base64 and image decoding, then the processor's resize and normalization, on the
/// frontend's loop. Set on one public measurement (in sample): vLLM issue 41267, vLLM 0.19.1
/// serving Qwen2.5-VL-7B on an H100, one 1920 x 1080 image, one output token: 167 ms of the
/// 293 ms to the first token passed before the request was scheduled, none of it queued; less
/// the API server's own work on a request (about 6 ms), 78 ns a pixel. SGLang's frontend
/// (pull request 19749, Qwen3-VL-8B, 720p images) adds about 100 ns a pixel per extra image,
/// the same order.
pub const PREPROCESS_NS_PER_PIXEL: f64 = 78.0;

/// One image of a request: its work, and a key that tells images apart (equal bytes, equal key).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Image {
    pub work: ImageWork,
    pub key: u64,
}

/// The images of a chat, Responses or Messages body, in order, or the one image a pooling
/// body's `input` is ([`crate::tokens::image_input`]); none for completions. `vision` is the
/// model's tower, `None` for a model without one (an image is then refused).
pub fn images(api: Api, body: &Value, vision: Option<&Vision>) -> Result<Vec<Image>, String> {
    if let Some(url) = crate::tokens::image_input(api, body)? {
        return Ok(vec![image(url, vision)?]);
    }
    // A prompt read as it is (completions, a text input) carries no images.
    if crate::tokens::prompt_key(api).is_some() {
        return Ok(Vec::new());
    }
    let conversation = crate::tokens::conversation(api, body)?;
    let messages = conversation.as_array().map_or(&[][..], Vec::as_slice);
    let mut out = Vec::new();
    for part in messages.iter().filter_map(|m| m.get("content")).filter_map(Value::as_array).flatten() {
        if part.get("type").and_then(Value::as_str) != Some("image_url") {
            continue;
        }
        let url = match part.get("image_url") {
            Some(Value::String(u)) => u.as_str(),
            Some(v) => v.get("url").and_then(Value::as_str).ok_or("an image_url part has no \"url\"")?,
            None => return Err("an image_url part has no \"image_url\"".into()),
        };
        out.push(image(url, vision)?);
    }
    Ok(out)
}

/// The image at `url` as the model's tower takes it.
fn image(url: &str, vision: Option<&Vision>) -> Result<Image, String> {
    let Some(vision) = vision else {
        return Err("this model takes no images (it has no vision tower); send text, or simulate a \
                    vision-language model"
            .into());
    };
    let (height, width) = size(url)?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    url.hash(&mut h);
    Ok(Image { work: vision.image(height, width), key: h.finish() })
}

/// vLLM's default cap on the images of one prompt, where `--limit-mm-per-prompt` gives none.
pub const DEFAULT_IMAGE_LIMIT: u32 = 999;

/// What a deployment takes of images: its tower (none for a text model) and how many a prompt
/// may carry (0 when served as its language model alone).
#[derive(Clone, Debug, PartialEq)]
pub struct Tower {
    pub vision: Option<Vision>,
    pub limit: u32,
}

impl Tower {
    pub fn of(setup: &crate::setup::SimSetup) -> Tower {
        let o = &setup.options;
        let limit = if o.language_model_only { 0 } else { o.image_limit.unwrap_or(DEFAULT_IMAGE_LIMIT) };
        Tower { vision: setup.model.vision.clone(), limit }
    }

    /// Reads a body's images and appends their tokens to its prompt `ids` (after the text,
    /// where vLLM's benchmark puts them): what the engine needs of them. More images than the
    /// deployment takes are refused in vLLM's words.
    pub fn expand(&self, api: Api, body: &Value, ids: &mut Vec<u32>) -> Result<Vec<EncoderInput>, String> {
        let imgs = images(api, body, self.vision.as_ref())?;
        if imgs.len() > self.limit as usize {
            return Err(format!(
                "At most {} image(s) may be provided in one prompt. Set `--limit-mm-per-prompt` to increase this \
                 limit.",
                self.limit
            ));
        }
        let starts = append_tokens(ids, &imgs);
        Ok(imgs.iter().zip(starts).map(|(img, at)| EncoderInput { at, work: img.work }).collect())
    }
}

/// Appends the placeholder tokens of `images` to `ids`, each image's its own (a server's prefix
/// cache tells images apart by their bytes); returns where each image's tokens start.
pub fn append_tokens(ids: &mut Vec<u32>, images: &[Image]) -> Vec<u32> {
    images
        .iter()
        .map(|img| {
            let at = u32::try_from(ids.len()).unwrap_or(u32::MAX);
            ids.extend((0..img.work.tokens).map(|j| (mix64(img.key ^ u64::from(j)) >> 33) as u32));
            at
        })
        .collect()
}

/// The (height, width) of the image a `data:` URL holds or a `file://` URL names, from its JPEG
/// or PNG header.
pub fn size(url: &str) -> Result<(u32, u32), String> {
    if let Some(path) = url.strip_prefix("file://") {
        return file_size(path);
    }
    let Some(rest) = url.strip_prefix("data:") else {
        let shown: String = url.chars().take(40).collect();
        return Err(format!(
            "the simulator reads images from data: URLs and local files and fetches nothing; send {shown:?}'s \
             bytes as a base64 data: URL, or the image as a file:// URL of a file on the simulator's machine"
        ));
    };
    let (meta, data) = rest.split_once(',').ok_or("a data: URL has no ',' before its data")?;
    if !meta.ends_with(";base64") {
        return Err("an image data: URL must be base64 (data:image/jpeg;base64,...)".into());
    }
    // The header is near the start: decode a prefix (a multiple of 4 characters), then more if
    // the JPEG's frame header lies further in.
    for take in [4096usize, 65_536, usize::MAX] {
        let end = take.min(data.len()) / 4 * 4;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&data.as_bytes()[..end])
            .map_err(|e| format!("an image's base64 does not decode: {e}"))?;
        match header_size(&bytes) {
            Some(s) => return Ok(s),
            None if end >= data.len() / 4 * 4 => break,
            None => {}
        }
    }
    Err("an image is neither a JPEG nor a PNG with a readable size; send one of those".into())
}

/// The (height, width) of a local image file: its first megabyte, then all of it if the JPEG's
/// frame header lies further in.
fn file_size(path: &str) -> Result<(u32, u32), String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("cannot read the image file {path:?} named by a file:// URL: {e}");
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    (&mut file).take(1 << 20).read_to_end(&mut bytes).map_err(cannot)?;
    if let Some(s) = header_size(&bytes) {
        return Ok(s);
    }
    file.read_to_end(&mut bytes).map_err(cannot)?;
    header_size(&bytes).ok_or_else(|| {
        format!("the image file {path:?} is neither a JPEG nor a PNG with a readable size; send one of those")
    })
}

/// (height, width) from a PNG's IHDR or a JPEG's start-of-frame, when `b` holds it.
fn header_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") && b.len() >= 24 {
        let w = u32::from_be_bytes(b[16..20].try_into().ok()?);
        let h = u32::from_be_bytes(b[20..24].try_into().ok()?);
        return Some((h, w));
    }
    if !b.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut i = 2;
    while i + 4 <= b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let marker = b[i + 1];
        if marker == 0xFF {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        // Start-of-frame markers: C0 to CF but C4 (DHT), C8 (JPG) and CC (DAC).
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            if i + 9 > b.len() {
                return None;
            }
            let h = u32::from(u16::from_be_bytes([b[i + 5], b[i + 6]]));
            let w = u32::from(u16::from_be_bytes([b[i + 7], b[i + 8]]));
            return Some((h, w));
        }
        i += 2 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn png(h: u32, w: u32) -> String {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        b.extend(w.to_be_bytes());
        b.extend(h.to_be_bytes());
        b.extend([8, 2, 0, 0, 0]);
        format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(b))
    }

    fn jpeg(h: u16, w: u16) -> String {
        // SOI, an APP0 segment, then a baseline frame header.
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8];
        b.extend(h.to_be_bytes());
        b.extend(w.to_be_bytes());
        b.extend([1, 1, 0x11, 0]);
        format!("data:image/jpeg;base64,{}", base64::engine::general_purpose::STANDARD.encode(b))
    }

    fn vision() -> Vision {
        crate::model::vision::qwen3_vl_tower()
    }

    #[test]
    fn sizes_come_from_jpeg_and_png_headers() {
        assert_eq!(size(&jpeg(720, 1280)).unwrap(), (720, 1280));
        assert_eq!(size(&png(256, 512)).unwrap(), (256, 512));
        let e = size("https://example.com/cat.jpg").unwrap_err();
        assert!(e.contains("fetches nothing") && e.contains("data: URL") && e.contains("file://"), "{e}");
        assert!(size("data:image/jpeg,abc").unwrap_err().contains("base64"));
        assert!(size("data:image/jpeg;base64,!!!!").unwrap_err().contains("does not decode"));
        let gif = format!("data:image/gif;base64,{}", base64::engine::general_purpose::STANDARD.encode(b"GIF89a...."));
        assert!(size(&gif).unwrap_err().contains("neither a JPEG nor a PNG"));
    }

    #[test]
    fn a_chat_s_images_become_their_tokens_after_the_text() {
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": jpeg(720, 1280)}},
            {"type": "image_url", "image_url": png(256, 256)},
        ]}]});
        let imgs = images(Api::Chat, &body, Some(&vision())).unwrap();
        assert_eq!(imgs.iter().map(|i| i.work.tokens).collect::<Vec<_>>(), [880, 64]);
        assert_ne!(imgs[0].key, imgs[1].key);
        let mut ids = vec![7, 8, 9];
        assert_eq!(append_tokens(&mut ids, &imgs), [3, 883]);
        assert_eq!(ids.len(), 3 + 880 + 64);
        assert!(images(Api::Completions, &json!({"prompt": "x"}), None).unwrap().is_empty());
        let e = images(Api::Chat, &body, None).unwrap_err();
        assert!(e.contains("takes no images"), "{e}");
        let text_only = json!({"messages": [{"role": "user", "content": "hello"}]});
        assert!(images(Api::Chat, &text_only, None).unwrap().is_empty());
    }

    #[test]
    fn a_file_url_s_image_is_sized_from_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let b64 = |u: String| base64::engine::general_purpose::STANDARD.decode(u.split_once(',').unwrap().1).unwrap();
        let jpg = tmp.path().join("photo.jpg");
        // An EXIF-sized segment before the frame header: found past the first read.
        let mut bytes = vec![0xFF, 0xD8];
        for _ in 0..20 {
            bytes.extend([0xFF, 0xE1, 0xFF, 0xFF]);
            bytes.extend(std::iter::repeat_n(0u8, 0xFFFF - 2));
        }
        bytes.extend(&b64(jpeg(600, 800))[2..]);
        std::fs::write(&jpg, bytes).unwrap();
        assert_eq!(size(&format!("file://{}", jpg.display())).unwrap(), (600, 800));
        let png_file = tmp.path().join("chart.png");
        std::fs::write(&png_file, b64(png(90, 160))).unwrap();
        assert_eq!(size(&format!("file://{}", png_file.display())).unwrap(), (90, 160));
        let e = size(&format!("file://{}/missing.png", tmp.path().display())).unwrap_err();
        assert!(e.contains("cannot read the image file") && e.contains("missing.png"), "{e}");
        let txt = tmp.path().join("notes.txt");
        std::fs::write(&txt, "hello").unwrap();
        let e = size(&format!("file://{}", txt.display())).unwrap_err();
        assert!(e.contains("neither a JPEG nor a PNG"), "{e}");
    }

    #[test]
    fn a_jpeg_the_workload_makes_is_sized() {
        let url = servebench_workload::datasets::images::data_url(48, 32, 3).unwrap();
        assert_eq!(size(&url).unwrap(), (32, 48));
    }
}

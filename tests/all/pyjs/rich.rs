//! The examples' rich results (a text block and a PNG image, decoded pixel by pixel)
//! and their confirmations through the `interaction` import.

use super::*;

/// A PNG as `(width, height, colour type, pixel bytes without the row filter bytes)`,
/// decoded here (the plugins write stored, uncompressed deflate, and filter type 0):
/// the signature, every chunk's CRC, the zlib header and Adler-32 are checked, so a
/// wrong byte anywhere fails the test.
fn decode_png(png: &[u8]) -> (u32, u32, u8, Vec<u8>) {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = u32::MAX;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
            }
        }
        !crc
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    let (mut at, mut header, mut idat, mut ended) = (8, None, Vec::new(), false);
    while at < png.len() {
        let len = be(&png[at..]) as usize;
        let kind = &png[at + 4..at + 8];
        let data = &png[at + 8..at + 8 + len];
        assert_eq!(
            be(&png[at + 8 + len..]),
            crc32(&png[at + 4..at + 8 + len]),
            "CRC of chunk {}",
            String::from_utf8_lossy(kind)
        );
        match kind {
            b"IHDR" => header = Some((be(data), be(&data[4..]), data[8], data[9])),
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => ended = true,
            other => panic!("unexpected chunk {}", String::from_utf8_lossy(other)),
        }
        at += 12 + len;
    }
    assert!(ended, "IEND");
    let (width, height, depth, colour) = header.expect("IHDR");
    assert_eq!(depth, 8);
    assert_eq!(&idat[..2], [0x78, 0x01], "zlib header");
    let (mut raw, mut at) = (Vec::new(), 2);
    loop {
        let last = idat[at] & 1;
        assert_eq!(idat[at] & 6, 0, "a stored block");
        let len = usize::from(u16::from_le_bytes([idat[at + 1], idat[at + 2]]));
        let nlen = u16::from_le_bytes([idat[at + 3], idat[at + 4]]);
        assert_eq!(usize::from(!nlen), len);
        raw.extend_from_slice(&idat[at + 5..at + 5 + len]);
        at += 5 + len;
        if last == 1 {
            break;
        }
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!(be(&idat[at..]), (b << 16) | a, "Adler-32");
    let row = 1 + width as usize * if colour == 2 { 3 } else { 1 };
    assert_eq!(raw.len(), row * height as usize);
    let mut pixels = Vec::new();
    for line in raw.chunks(row) {
        assert_eq!(line[0], 0, "filter type 0");
        pixels.extend_from_slice(&line[1..]);
    }
    (width, height, colour, pixels)
}

/// The one image of a rich result's blocks, decoded.
fn image_of(blocks: &[ContentBlock]) -> (u32, u32, u8, Vec<u8>) {
    match blocks {
        [ContentBlock::Text { .. }, ContentBlock::Image(Media { data, mime_type })] => {
            assert_eq!(mime_type, "image/png");
            decode_png(data)
        }
        other => panic!("not a text and an image: {other:?}"),
    }
}

pub(super) async fn rich_results_and_confirmations(registry: &Registry) {
    // Rich results: a text block and a PNG image, each written byte by byte by the
    // plugin; decoded here, pixel by pixel.
    let chart = call_with(
        registry,
        &CallContext::new(),
        "word_chart",
        json!({"text": "The cat and the hat\nthe end", "top": 2}),
    )
    .await
    .expect("word_chart");
    assert_eq!(chart.content, Value::Null, "no structured result");
    assert_eq!(
        chart.blocks[0],
        text("most frequent words, left to right: the (3), and (1)")
    );
    // Grayscale 8x16: "the" (3) fills the height, "and" (1) is 5 pixels tall
    // (round(16 / 3)); each bar 4 pixels wide, black on white.
    let (width, height, colour, pixels) = image_of(&chart.blocks);
    assert_eq!((width, height, colour), (8, 16, 0));
    let expected: Vec<u8> = (0..16u32)
        .flat_map(|y| {
            let and = if y >= 11 { 0 } else { 255 };
            [0, 0, 0, 0, and, and, and, and]
        })
        .collect();
    assert_eq!(pixels, expected);
    assert_eq!(
        call_with(
            registry,
            &CallContext::new(),
            "word_chart",
            json!({"text": "..."})
        )
        .await,
        Err(ToolError::InvalidArguments {
            tool: "word_chart".into(),
            message: r#"the text has no words to chart (or "top" is 0); send a text with words"#
                .into()
        })
    );
    let flag = call_with(
        registry,
        &CallContext::new(),
        "flag",
        json!({"language": "fr"}),
    )
    .await
    .expect("flag");
    assert_eq!(
        flag.blocks[0],
        text(r#"the colours of the flag for "fr", as three vertical bands"#)
    );
    // RGB 6x4: blue, white, red, two pixels each.
    let (width, height, colour, pixels) = image_of(&flag.blocks);
    assert_eq!((width, height, colour), (6, 4, 2));
    let row = [
        0, 35, 149, 0, 35, 149, 255, 255, 255, 255, 255, 255, 237, 41, 57, 237, 41, 57,
    ];
    assert_eq!(pixels, row.repeat(4));

    // Confirmations, through the `interaction` import (granted and allowed here): the
    // user sees the plugin's message; yes runs the step, no does not.
    let yes = User::new(true);
    assert_eq!(
        call_with(
            registry,
            &asking(&yes),
            "count_confirmed",
            json!({"text": "one two three"})
        )
        .await
        .map(|r| r.blocks),
        Ok(vec![text("3 words")])
    );
    assert_eq!(
        call_with(
            registry,
            &asking(&yes),
            "greet_confirmed",
            json!({"name": "Ada", "language": "de"})
        )
        .await
        .map(|r| r.blocks),
        Ok(vec![text("Hallo, Ada!")])
    );
    assert_eq!(
        yes.seen(),
        [
            "Count the words of a text of 13 characters?",
            r#"Send the greeting "Hallo, Ada!"?"#
        ]
    );
    let no = User::new(false);
    assert_eq!(
        call_with(
            registry,
            &asking(&no),
            "count_confirmed",
            json!({"text": "one"})
        )
        .await
        .map(|r| r.blocks),
        Ok(vec![text("the user declined; nothing was counted")])
    );
    assert_eq!(
        call_with(
            registry,
            &asking(&no),
            "greet_confirmed",
            json!({"name": "Ada"})
        )
        .await
        .map(|r| r.blocks),
        Ok(vec![text("the user declined; no greeting was sent")])
    );
    assert_eq!(no.seen().len(), 2);
    // Nobody to ask (no client that can): never a yes, the tool fails saying why.
    let unsupported = "could not ask the user: nobody can be asked during this call (the client cannot ask its user, or the call is not served to a client); go on without asking, or fail and say what you need";
    assert_eq!(
        call_with(
            registry,
            &CallContext::new(),
            "count_confirmed",
            json!({"text": "a"})
        )
        .await,
        failed("count_confirmed", unsupported)
    );
    assert_eq!(
        call_with(
            registry,
            &CallContext::new(),
            "greet_confirmed",
            json!({"name": "Ada"})
        )
        .await,
        failed("greet_confirmed", unsupported)
    );
}

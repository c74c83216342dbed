// greeting: a wasm-toolhost plugin written in JavaScript (built with ComponentizeJS / jco).
//
// Four tools: `greeting` greets a person in one of a few languages; `js_fetch` GETs a URL
// with the standard `fetch` (see below); `flag` returns a small PNG of a language's flag
// colours (a rich result: a text block and an image block); `greet_confirmed` asks the
// user to confirm before it greets (the `interaction` import: the manifest must say
// `[grants] ask = true` and the operator allow it with `--plugin-ask`, else the question
// is refused and the tool fails saying why). They show the things every plugin does:
//
// - `tools.definitions()` says which tools the plugin offers: a name, a description for
//   the model and a JSON Schema of the arguments, as JSON text (and optionally a
//   `title`, behaviour hints in `annotations` and an `outputSchema`; leave one out or
//   set it to `undefined` to say nothing);
// - `tools.call()` runs one, gets the arguments as JSON text and returns a tool result:
//   `{ content: [blocks], structured: jsonText }`, where a block is
//   `{ tag: 'text', val: '...' }`, `{ tag: 'image', val: { data: Uint8Array, mimeType } }`
//   and so on, and `structured` is optional JSON text (empty content with `structured`
//   set: the JSON is the one text block, as 0.2.0's JSON result was);
// - errors are thrown as `{ tag: 'invalid-arguments', val: message }` (the model sent
//   something wrong: say what and how to fix it) or `{ tag: 'failed', val: message }`
//   (the tool ran and failed). Any other exception traps the instance: the host reports
//   the tool crashed.
//
// The imports are the WIT interfaces of ../../../wit/plugin.wit
// (toolhost:plugin@0.3.0, world `rich-plugin`), by their full names. As a rich-plugin it
// also exports `resources` (the resource `plugin://greeting/languages`, and the template
// `plugin://greeting/hello/{language}`) and `prompts` (`greeting_card`).
//
// HTTP: ComponentizeJS's `fetch` sends through wasi:http/outgoing-handler, which the host
// checks against the plugin's `[grants] http` (greeting.toml) and the operator's
// `--plugin-http`: without both, every request is refused. `call` is async so a tool may
// `await fetch(...)`: ComponentizeJS runs the event loop until the promise settles. A
// refused request rejects with a TypeError ("NetworkError when attempting to fetch
// resource"); the host's log says which rule refused it. An optional config key, ACCEPT,
// is read through the `config` import.

import { log } from 'toolhost:plugin/log@0.3.0';
import { get } from 'toolhost:plugin/config@0.3.0';
import { confirm } from 'toolhost:plugin/interaction@0.3.0';

const GREETINGS = {
  en: 'Hello',
  fr: 'Bonjour',
  de: 'Hallo',
  es: 'Hola',
};

const PARAMETERS = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'Who to greet.' },
    language: {
      type: 'string',
      enum: Object.keys(GREETINGS),
      description: 'The language of the greeting (default en).',
    },
  },
  required: ['name'],
};

function invalid(message) {
  return { tag: 'invalid-arguments', val: message };
}

function jsonType(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value === 'number' ? 'number' : typeof value;
}

function greeting(args) {
  const { name, language = 'en' } = args;
  if (typeof name !== 'string') {
    throw invalid(`argument "name" must be a string, got ${jsonType(name)}`);
  }
  if (name.trim() === '') {
    throw invalid('argument "name" is empty; pass the name of the person to greet');
  }
  if (!Object.hasOwn(GREETINGS, language)) {
    const allowed = Object.keys(GREETINGS).map((code) => `"${code}"`).join(', ');
    throw invalid(`argument "language" must be one of ${allowed}, got ${JSON.stringify(language)}`);
  }
  log('debug', `greeting in ${language}`);
  return `${GREETINGS[language]}, ${name.trim()}!`;
}

const FETCH_PARAMETERS = {
  type: 'object',
  properties: {
    url: { type: 'string', description: 'The http:// or https:// URL to fetch.' },
  },
  required: ['url'],
};

const MAX_BODY_CHARS = 4096;

async function jsFetch(args) {
  const { url } = args;
  if (typeof url !== 'string') {
    throw invalid(`argument "url" must be a string, got ${jsonType(url)}`);
  }
  let response;
  try {
    response = await fetch(url, { headers: { accept: get('ACCEPT') ?? '*/*' } });
  } catch (err) {
    throw {
      tag: 'failed',
      val: `the request failed or the host refused it (this tool may only reach the hosts it was granted): ${err.message}`,
    };
  }
  const body = await response.text();
  return { status: response.status, body: body.slice(0, MAX_BODY_CHARS) };
}

// The PNG is written here, byte by byte: 8-bit RGB, stored (uncompressed) deflate.

function crc32(bytes) {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit++) {
      crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
    }
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function adler32(bytes) {
  let a = 1;
  let b = 0;
  for (const byte of bytes) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

function u32(value) {
  return [(value >>> 24) & 255, (value >>> 16) & 255, (value >>> 8) & 255, value & 255];
}

function chunk(kind, data) {
  const body = [...kind].map((c) => c.charCodeAt(0)).concat(data);
  return u32(data.length).concat(body, u32(crc32(body)));
}

// An RGB PNG of `rows` (each `width` pixels of [r, g, b]); small images only (one
// stored deflate block holds up to 65,535 bytes).
function png(width, rows) {
  const raw = rows.flatMap((row) => [0].concat(row.flat())); // filter type 0 per row
  const deflated = [0x78, 0x01, 1, raw.length & 255, raw.length >>> 8,
    ~raw.length & 255, (~raw.length >>> 8) & 255].concat(raw, u32(adler32(raw)));
  const header = u32(width).concat(u32(rows.length), [8, 2, 0, 0, 0]);
  return new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].concat(
    chunk('IHDR', header), chunk('IDAT', deflated), chunk('IEND', [])));
}

// Three vertical bands of each language's flag (English: the Union flag's colours).
const FLAGS = {
  en: [[1, 33, 105], [255, 255, 255], [200, 16, 46]],
  fr: [[0, 35, 149], [255, 255, 255], [237, 41, 57]],
  de: [[0, 0, 0], [221, 0, 0], [255, 206, 0]],
  es: [[170, 21, 27], [241, 191, 0], [170, 21, 27]],
};

const FLAG_PARAMETERS = {
  type: 'object',
  properties: {
    language: {
      type: 'string',
      enum: Object.keys(FLAGS),
      description: 'The language whose flag colours to draw.',
    },
  },
  required: ['language'],
};

function flag(args) {
  const { language } = args;
  if (!Object.hasOwn(FLAGS, language)) {
    const allowed = Object.keys(FLAGS).map((code) => `"${code}"`).join(', ');
    throw invalid(`argument "language" must be one of ${allowed}, got ${JSON.stringify(language)}`);
  }
  // 6x4 pixels: three bands, two pixels each.
  const row = FLAGS[language].flatMap((colour) => [colour, colour]);
  return {
    content: [
      { tag: 'text', val: `the colours of the flag for "${language}", as three vertical bands` },
      { tag: 'image', val: { data: png(6, [row, row, row, row]), mimeType: 'image/png' } },
    ],
  };
}

function greetConfirmed(args) {
  const text = greeting(args);
  let accepted;
  try {
    // true only when the user accepted; a refusal (no grant, a client that cannot ask,
    // no answer in time) throws, with the interaction-error as its `payload`: never a yes.
    accepted = confirm(`Send the greeting "${text}"?`);
  } catch (err) {
    const why = err.payload === undefined ? String(err) : err.payload.val;
    throw { tag: 'failed', val: `could not ask the user: ${why}` };
  }
  const answer = accepted ? text : 'the user declined; no greeting was sent';
  return { content: [{ tag: 'text', val: answer }] };
}

const TOOLS = {
  greeting: {
    title: 'Greet someone',
    description: 'Greet a person by name, in English, French, German or Spanish.',
    parameters: PARAMETERS,
    // It changes nothing, and the same arguments give the same answer.
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    run: greeting,
  },
  js_fetch: {
    title: 'Fetch a URL',
    description: 'Fetch a URL (GET) and return its status and the start of its text. Only the hosts this tool was granted can be reached.',
    parameters: FETCH_PARAMETERS,
    annotations: { readOnlyHint: true, openWorldHint: true },
    run: jsFetch,
  },
  flag: {
    title: 'Flag colours',
    description: 'Draw the colours of the flag of a greeting language as a small PNG.',
    parameters: FLAG_PARAMETERS,
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    run: flag,
    rich: true,
  },
  greet_confirmed: {
    title: 'Greet, once confirmed',
    description: 'Ask the user to confirm, then greet a person as `greeting` does.',
    parameters: PARAMETERS,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: greetConfirmed,
    rich: true,
  },
};

export const tools = {
  definitions() {
    return Object.entries(TOOLS).map(([name, tool]) => ({
      name,
      description: tool.description,
      parameters: JSON.stringify(tool.parameters),
      title: tool.title,
      annotations: tool.annotations,
    }));
  },

  async call(name, argumentsJson, _env) {
    const tool = TOOLS[name];
    if (tool === undefined) {
      throw { tag: 'failed', val: `this plugin has no tool named "${name}"; it offers: ${Object.keys(TOOLS).join(', ')}` };
    }
    let args;
    try {
      args = argumentsJson.trim() === '' ? {} : JSON.parse(argumentsJson);
    } catch (err) {
      throw invalid(`the arguments are not valid JSON (${err.message}); send one JSON object`);
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      throw invalid(`the arguments must be an object, got ${jsonType(args)}`);
    }
    const result = await tool.run(args);
    // A rich tool returns its blocks; the others a JSON value, given as `structured` with
    // no blocks (the host shows it as the one text block).
    return tool.rich ? result : { content: [], structured: JSON.stringify(result) };
  },
};

// Resources and prompts (world `rich-plugin`). Every URI starts with the plugin's
// namespace, plugin://greeting/ (the host refuses any other). Records are objects with
// camelCase fields; an option left out (or `undefined`) is none.
const NAMESPACE = 'plugin://greeting/';

export const resources = {
  list(_cursor, _env) {
    return {
      resources: [{
        uri: `${NAMESPACE}languages`,
        name: 'languages',
        title: 'Greeting languages',
        mimeType: 'application/json',
      }],
    };
  },

  templates() {
    return [{
      uriTemplate: `${NAMESPACE}hello/{language}`,
      name: 'hello',
      description: 'The greeting word of a language.',
      mimeType: 'text/plain',
    }];
  },

  read(uri, _env) {
    if (uri === `${NAMESPACE}languages`) {
      const body = JSON.stringify(Object.keys(GREETINGS));
      return [{ uri, mimeType: 'application/json', body: { tag: 'text', val: body } }];
    }
    const language = uri.startsWith(`${NAMESPACE}hello/`) ? uri.slice(`${NAMESPACE}hello/`.length) : undefined;
    if (language !== undefined && Object.hasOwn(GREETINGS, language)) {
      return [{ uri, mimeType: 'text/plain', body: { tag: 'text', val: GREETINGS[language] } }];
    }
    throw { tag: 'not-found', val: `no resource at ${uri}; try ${NAMESPACE}languages or ${NAMESPACE}hello/LANGUAGE` };
  },
};

export const prompts = {
  definitions() {
    return [{
      name: 'greeting_card',
      title: 'Write a greeting card',
      description: 'Ask for a short greeting card for a person.',
      arguments: [{ name: 'name', description: 'Who the card is for.', required: true }],
    }];
  },

  get(name, args, _env) {
    if (name !== 'greeting_card') {
      throw { tag: 'failed', val: `this plugin has no prompt named "${name}"; it offers greeting_card` };
    }
    const who = new Map(args).get('name') ?? '';
    return {
      description: 'A short greeting card.',
      messages: [{ role: 'user', content: { tag: 'text', val: `Write a two-line greeting card for ${who}.` } }],
    };
  },
};

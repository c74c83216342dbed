// greeting: a wasm-toolhost plugin written in JavaScript (built with ComponentizeJS / jco).
//
// Two tools: `greeting` greets a person in one of a few languages; `js_fetch` GETs a URL
// with the standard `fetch` (see below). They show the three things every plugin does:
//
// - `tools.definitions()` says which tools the plugin offers: a name, a description for
//   the model and a JSON Schema of the arguments, as JSON text (and optionally a
//   `title`, behaviour hints in `annotations` and an `outputSchema`; leave one out or
//   set it to `undefined` to say nothing);
// - `tools.call()` runs one, gets the arguments as JSON text and returns the result as
//   JSON text;
// - errors are thrown as `{ tag: 'invalid-arguments', val: message }` (the model sent
//   something wrong: say what and how to fix it) or `{ tag: 'failed', val: message }`
//   (the tool ran and failed). Any other exception traps the instance: the host reports
//   the tool crashed.
//
// The imports are the WIT interfaces of ../../../wit/legacy/plugin-0.2.0.wit, by their full names.
//
// HTTP: ComponentizeJS's `fetch` sends through wasi:http/outgoing-handler, which the host
// checks against the plugin's `[grants] http` (greeting.toml) and the operator's
// `--plugin-http`: without both, every request is refused. `call` is async so a tool may
// `await fetch(...)`: ComponentizeJS runs the event loop until the promise settles. A
// refused request rejects with a TypeError ("NetworkError when attempting to fetch
// resource"); the host's log says which rule refused it. An optional config key, ACCEPT,
// is read through the `config` import.

import { log } from 'toolhost:plugin/log@0.2.0';
import { get } from 'toolhost:plugin/config@0.2.0';

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
    return JSON.stringify(await tool.run(args));
  },
};

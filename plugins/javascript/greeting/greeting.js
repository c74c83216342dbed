// greeting: a wasm-toolhost plugin written in JavaScript (built with ComponentizeJS / jco).
//
// One tool, `greeting`: greets a person in one of a few languages. It shows the three
// things every plugin does:
//
// - `tools.definitions()` says which tools the plugin offers: a name, a description for
//   the model and a JSON Schema of the arguments, as JSON text;
// - `tools.call()` runs one, gets the arguments as JSON text and returns the result as
//   JSON text;
// - errors are thrown as `{ tag: 'invalid-arguments', val: message }` (the model sent
//   something wrong: say what and how to fix it) or `{ tag: 'failed', val: message }`
//   (the tool ran and failed). Any other exception traps the instance: the host reports
//   the tool crashed.
//
// The imports are the WIT interfaces of ../../../wit/plugin.wit, by their full names.

import { log } from 'toolhost:plugin/log@0.1.0';

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

const TOOLS = {
  greeting: {
    description: 'Greet a person by name, in English, French, German or Spanish.',
    run: greeting,
  },
};

export const tools = {
  definitions() {
    return Object.entries(TOOLS).map(([name, tool]) => ({
      name,
      description: tool.description,
      parameters: JSON.stringify(PARAMETERS),
    }));
  },

  call(name, argumentsJson, _env) {
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
    return JSON.stringify(tool.run(args));
  },
};

// run_javascript: code mode's JavaScript tool. The model writes a short program that
// calls the registry's tools; it runs here, inside this plugin's sandbox (SpiderMonkey
// compiled to WebAssembly by ComponentizeJS), so twenty tool calls cost one model round
// trip instead of twenty.
//
// What the program gets:
// - its code is the body of an async function: `await` works at the top level and
//   `return VALUE` gives the result (any JSON value);
// - `tools.NAME(args)` calls registry tool NAME with `args` (an object) through the
//   `registry` import (toolhost:plugin/registry@0.3.0) and resolves to the tool's result,
//   parsed from JSON; a failed call rejects with an `Error` whose message is the text the
//   model would read for a direct call; `tools.call(name, args)` does the same for any
//   name; `tools.list()` gives `[{name, description}]` of the tools it may call;
// - `console.log` (and info, warn, error, debug) is captured and returned with the result.
//
// The host enforces the sandbox: the grant (`[grants] tools` in run_javascript.toml and
// the operator's `--plugin-tools`), the time and memory limits, `max_tool_calls`, and the
// checks of every nested call. This file only shapes what the model sees, within caps:
// console output up to OUTPUT_CAP (16 KiB; the rest is dropped and counted) and a returned
// value of at most RESULT_CAP (32 KiB of JSON; more is an error asking for less), so the
// whole result fits the registry's default 64 KiB cap on one tool result.
//
// Each call runs on a fresh instance, so nothing a program changes (globals, prototypes,
// `tools` itself) is seen by the next one.

import { definitions as registryDefinitions, call as registryCall } from 'toolhost:plugin/registry@0.3.0';

/** Console output returned per call: at most this many bytes of its JSON string (16 KiB). */
const OUTPUT_CAP = 16 * 1024;
/** The returned value: at most this many bytes of JSON (32 KiB). With the output, the
 * whole result stays under the registry's default 64 KiB cap on one tool result. */
const RESULT_CAP = 32 * 1024;
/** How many event-loop turns a program may leave its promise pending with nothing left to run. */
const IDLE_TURNS = 64;

const AsyncFunction = (async () => {}).constructor;
// Taken before any program runs: a program that replaces JSON's functions changes only
// what it sees, not how its own answer is written.
const stringify = JSON.stringify;
const parse = JSON.parse;

function failed(message) {
  return { tag: 'failed', val: message };
}

function invalid(message) {
  return { tag: 'invalid-arguments', val: message };
}

/** The first line of a description, for the tool list. */
function firstLine(text) {
  const line = String(text).split('\n')[0].trim();
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
}

/** The tools the program may call, as `{name, description}`, from the registry import. */
function grantedTools() {
  return registryDefinitions().map((d) => ({ name: d.name, description: firstLine(d.description) }));
}

const HOW = [
  'Runs a JavaScript program (ES2023, in a sandbox) that calls other tools, so many tool calls cost one round trip.',
  'The code is the body of an async function: use `await`, and `return` a JSON value as the result.',
  '`await tools.NAME({arg: value})` calls tool NAME and gives its result as parsed JSON; a failed call throws an Error whose message says why.',
  '`await tools.call("NAME", {...})` does the same for any name; `await tools.list()` lists the tools you may call ([{name, description}]).',
  `The result is {"result": <returned value>, "output": <console.log text>}; output is cut after ${OUTPUT_CAP / 1024} KiB, and the returned value's JSON may be at most ${RESULT_CAP / 1024} KiB.`,
  'No files, network or environment beyond the tools; each run starts from a fresh sandbox; the host stops a program at its time, memory and tool-call limits.',
];

/** The description the model reads: how to use it, and the tools it may call. */
function description() {
  let listed = [];
  try {
    listed = grantedTools();
  } catch (_) {
    listed = [];
  }
  const tools = listed.length === 0
    ? 'Call `await tools.list()` to see which tools you may call.'
    : `Tools you may call:\n${listed.map((t) => `- ${t.name}: ${t.description}`).join('\n')}`;
  return `${HOW.join('\n')}\n${tools}`;
}

const PARAMETERS = {
  type: 'object',
  properties: {
    code: {
      type: 'string',
      description: 'The body of an async function: `const hits = await tools.grep({pattern: "TODO"}); return hits;`',
    },
  },
  required: ['code'],
};

/** Bytes of `text` as UTF-8. */
function utf8Length(text) {
  let bytes = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit < 0xdc00) { bytes += 4; i += 1; } else bytes += 3;
  }
  return bytes;
}

/** Bytes `text` takes as a JSON string's content (escapes included), UTF-8. */
function jsonBytes(text) {
  return utf8Length(stringify(text)) - 2;
}

/** Console output, kept while its JSON string fits OUTPUT_CAP; what is dropped is counted. */
class Output {
  constructor() {
    this.parts = [];
    this.kept = 0;
    this.dropped = 0;
  }

  write(text) {
    if (this.dropped > 0) {
      this.dropped += text.length;
      return;
    }
    const room = OUTPUT_CAP - this.kept;
    const size = jsonBytes(text);
    if (size <= room) {
      this.parts.push(text);
      this.kept += size;
      return;
    }
    // Keep the longest prefix that fits (each unit takes at most 6 bytes escaped).
    let keep = Math.min(text.length, room);
    while (keep > 0 && jsonBytes(text.slice(0, keep)) > room) keep = Math.floor(keep * 0.9);
    this.parts.push(text.slice(0, keep));
    this.kept = OUTPUT_CAP;
    this.dropped = text.length - keep;
  }

  text() {
    const kept = this.parts.join('');
    return this.dropped === 0
      ? kept
      : `${kept}\n[output truncated: ${this.dropped} more characters were not kept (limit ${OUTPUT_CAP / 1024} KiB)]`;
  }
}

/** One console argument as text: strings as they are, the rest as JSON when possible. */
function show(value) {
  if (typeof value === 'string') return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return String(value);
  try {
    const json = stringify(value);
    return json === undefined ? String(value) : json;
  } catch (_) {
    return String(value);
  }
}

function makeConsole(output) {
  const log = (...args) => output.write(`${args.map(show).join(' ')}\n`);
  return { log, info: log, warn: log, error: log, debug: log, trace: log };
}

/** The text of a tool error thrown by the registry import (a ComponentError). */
function toolErrorText(err) {
  const payload = err && err.payload;
  if (payload && typeof payload.val === 'string') return payload.val;
  return err instanceof Error ? err.message : String(err);
}

/** Calls registry tool `name` with `args`; the parsed JSON result, or throws an Error. */
function callTool(name, args) {
  if (typeof name !== 'string') {
    throw new TypeError(`a tool name must be a string, got ${typeof name}`);
  }
  const given = args === undefined ? {} : args;
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new TypeError(`the arguments of tools.${name} must be an object, like {pattern: "x"}`);
  }
  const text = stringify(given);
  let answer;
  try {
    answer = registryCall(name, text);
  } catch (err) {
    const error = new Error(toolErrorText(err));
    error.tool = name;
    throw error;
  }
  return parse(answer);
}

const NOT_TOOLS = new Set(['then', 'toJSON', 'toString', 'valueOf', 'constructor', 'inspect']);

/** The `tools` object: any property is a tool; `list` and `call` are helpers. */
function makeTools() {
  const target = Object.create(null);
  return new Proxy(target, {
    get(_target, key) {
      // Not tools: what JavaScript itself looks up on an object (await, JSON, printing).
      if (typeof key !== 'string' || NOT_TOOLS.has(key)) return undefined;
      if (key === 'list') return async () => grantedTools();
      if (key === 'call') return async (name, args) => callTool(name, args);
      return async (args) => callTool(key, args);
    },
    has(_target, key) {
      return typeof key === 'string';
    },
  });
}

// The program is compiled as `async function anonymous(tools,console\n) {\n<code>\n}`:
// its first line is line 3 of that source.
const LINE_OFFSET = 2;

/** "line L, column C" of an error in the program, or "" when it is not in the program. */
function whereInProgram(err) {
  // SpiderMonkey: frames of Function-constructor code read "...> Function:LINE:COLUMN".
  const stack = err && typeof err.stack === 'string' ? err.stack : '';
  const frame = /> (?:Function|AsyncFunction):(\d+):(\d+)/.exec(stack);
  if (frame) {
    const line = Number(frame[1]) - LINE_OFFSET;
    if (line >= 1) return `line ${line}, column ${Number(frame[2])}`;
  }
  return '';
}

/** "line L, column C" of a syntax error in the program. */
function syntaxWhere(err) {
  if (typeof err.lineNumber === 'number') {
    const line = err.lineNumber - LINE_OFFSET;
    const column = typeof err.columnNumber === 'number' ? err.columnNumber : 0;
    if (line >= 1) return `line ${line}, column ${column}`;
  }
  return whereInProgram(err);
}

function withOutput(message, output) {
  const text = output.text();
  return text === '' ? message : `${message}\nconsole output before it:\n${text}`;
}

/** What an exception thrown by the program says to the model. */
function describeThrow(err) {
  if (err instanceof Error) {
    const where = whereInProgram(err);
    const at = where === '' ? '' : ` at ${where}`;
    return `the program threw ${err.name}${at}: ${err.message}`;
  }
  return `the program threw a value that is not an Error: ${show(err)}`;
}

async function runProgram(code) {
  const output = new Output();
  const programConsole = makeConsole(output);
  globalThis.console = programConsole;
  const tools = makeTools();
  let program;
  try {
    program = new AsyncFunction('tools', 'console', code);
  } catch (err) {
    if (err instanceof SyntaxError) {
      const where = syntaxWhere(err);
      throw invalid(`SyntaxError${where === '' ? '' : ` at ${where}`}: ${err.message}; fix the code and run it again`);
    }
    throw failed(`the program could not be compiled: ${show(err)}`);
  }
  // Drive the program to completion here: a promise that is still pending once nothing
  // else can run (no timer, no request in flight) never settles, so the call ends with
  // an error instead of waiting for the host's time limit.
  let settled = false;
  let value;
  let error;
  let threw = false;
  program(tools, programConsole).then(
    (v) => { settled = true; value = v; },
    (e) => { settled = true; threw = true; error = e; },
  );
  let idle = 0;
  while (!settled) {
    // One macrotask turn: lets timers and fetches progress; a pending promise with
    // nothing queued anywhere stays pending through every turn.
    // eslint-disable-next-line no-await-in-loop
    await new Promise((resolve) => realSetTimeout(resolve, 0));
    idle += 1;
    if (!settled && idle > IDLE_TURNS && !hasPendingWork()) {
      throw failed(withOutput(
        'the program never finished: its promise is still pending and nothing is left to run (an `await` of a promise that never resolves?); await only promises that settle',
        output,
      ));
    }
  }
  if (threw) throw failed(withOutput(describeThrow(error), output));
  let json;
  try {
    json = value === undefined ? 'null' : stringify(value);
  } catch (err) {
    throw failed(withOutput(`the returned value is not JSON (${err.message}); return plain data`, output));
  }
  if (json === undefined) json = 'null';
  const size = utf8Length(json);
  if (size > RESULT_CAP) {
    throw failed(withOutput(
      `the returned value is ${size} bytes of JSON, over the limit of ${RESULT_CAP / 1024} KiB; return less (a count, a summary, the first items)`,
      output,
    ));
  }
  return `{"result":${json},"output":${stringify(output.text())}}`;
}

// What may still settle a pending promise: the program's timers and requests in
// flight, counted by wrapping setTimeout/clearTimeout and fetch.
let pendingWork = 0;
function hasPendingWork() {
  return pendingWork > 0;
}
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const realFetch = globalThis.fetch;
const liveTimers = new Set();
globalThis.setTimeout = (fn, ms, ...args) => {
  let id;
  const wrapped = () => {
    if (liveTimers.delete(id)) pendingWork -= 1;
    if (typeof fn === 'function') fn(...args);
  };
  id = realSetTimeout(wrapped, ms);
  liveTimers.add(id);
  pendingWork += 1;
  return id;
};
globalThis.clearTimeout = (id) => {
  if (liveTimers.delete(id)) pendingWork -= 1;
  realClearTimeout(id);
};
if (typeof realFetch === 'function') {
  globalThis.fetch = (...args) => {
    pendingWork += 1;
    const done = () => { pendingWork -= 1; };
    const request = realFetch(...args);
    request.then(done, done);
    return request;
  };
}

export const tools = {
  definitions() {
    return [{
      name: 'run_javascript',
      description: description(),
      parameters: stringify(PARAMETERS),
      title: 'Run a JavaScript program that calls tools',
      annotations: { openWorldHint: false },
    }];
  },

  async call(name, argumentsJson, _env) {
    if (name !== 'run_javascript') {
      throw failed(`this plugin has no tool named "${name}"; it offers: run_javascript`);
    }
    let args;
    try {
      args = parse(argumentsJson);
    } catch (err) {
      throw invalid(`the arguments are not valid JSON (${err.message}); send {"code": "..."}`);
    }
    if (args === null || typeof args !== 'object' || typeof args.code !== 'string') {
      throw invalid('argument "code" must be a string: the body of an async function');
    }
    const structured = await runProgram(args.code);
    return { content: [], structured };
  },
};

// The settings of a conversation (system prompt, sampling, thinking, JSON output): the
// form in the chat header shows the open conversation's, and every change is saved with it.
// `request(settings)` turns them into the fields of an OpenAI chat request.
import { byTestId as field } from './dom.js';

const SCHEMA = `{
  "type": "object",
  "properties": {
    "city": { "type": "string", "maxLength": 40 },
    "country": { "type": "string", "maxLength": 40 },
    "population": { "type": "integer", "minimum": 0 }
  },
  "required": ["city", "country"],
  "additionalProperties": false
}`;

export function defaultSettings() {
  return { system: '', temperature: 0.7, topP: 0.95, maxTokens: 512, thinking: false, json: false, schema: SCHEMA };
}

/** The form's fields by testid → [settings key, how to read it, how to show it]. */
const FIELDS = {
  system: ['system', (el) => el.value, (el, v) => (el.value = v)],
  temperature: ['temperature', (el) => Number(el.value), (el, v) => (el.value = v)],
  'top-p': ['topP', (el) => Number(el.value), (el, v) => (el.value = v)],
  'max-tokens': ['maxTokens', (el) => Number(el.value), (el, v) => (el.value = v)],
  'thinking-toggle': ['thinking', (el) => el.checked, (el, v) => (el.checked = v)],
  'json-toggle': ['json', (el) => el.checked, (el, v) => (el.checked = v)],
  'json-schema': ['schema', (el) => el.value, (el, v) => (el.value = v)],
};

/** Show `settings` in the form. */
export function showSettings(settings) {
  for (const [id, [key, , write]] of Object.entries(FIELDS)) write(field(id), settings[key]);
  field('json-schema').closest('label').hidden = !settings.json;
}

/** Call `onChange(settings)` with the form's values whenever a field changes. */
export function watchSettings(onChange) {
  const read = () => {
    const out = {};
    for (const [id, [key, get]] of Object.entries(FIELDS)) out[key] = get(field(id));
    field('json-schema').closest('label').hidden = !out.json;
    return out;
  };
  for (const id of Object.keys(FIELDS)) field(id).addEventListener('input', () => onChange(read()));
}

/** The request fields of `settings` for a model with `context` positions; throws when
 * the JSON Schema is not JSON (nothing is sent then). */
export function requestFields(settings, context) {
  const max = Number(settings.maxTokens) || 512;
  let response_format;
  if (settings.json) {
    const text = settings.schema.trim();
    let schema;
    try {
      schema = text ? JSON.parse(text) : null;
    } catch (e) {
      throw Object.assign(new Error(`the JSON Schema is not JSON: ${e.message}`), { code: 'INVALID_ARGUMENT' });
    }
    response_format = schema ? { type: 'json_schema', json_schema: { name: 'reply', schema, strict: true } } : { type: 'json_object' };
  }
  return {
    // A limit past the context means "as many as fit" (unset); OpenAI's API would refuse it.
    max_tokens: max < context ? max : undefined,
    temperature: Number.isFinite(settings.temperature) ? settings.temperature : 0.7,
    top_p: Number.isFinite(settings.topP) && settings.topP > 0 ? settings.topP : 1,
    chat_template_kwargs: { enable_thinking: !!settings.thinking },
    response_format,
  };
}

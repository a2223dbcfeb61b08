// A conversation's settings as data: the defaults a new conversation starts with (system
// prompt, sampling, thinking, JSON output with a JSON Schema), and `requestFields`, which
// turns them into the fields of an OpenAI chat request. No form here: the settings form
// (components/settings-form.js) shows and reads them.

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

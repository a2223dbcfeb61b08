// The settings form in the chat header: it shows the open conversation's settings, and
// reports every change (saved with the conversation). What the settings are, and what they
// make of a request, is stores/settings.js.
import { byTestId as field } from './dom.js';

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

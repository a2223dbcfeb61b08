// Model output → safe HTML. The text is untrusted: markdown (marked) renders with raw HTML
// escaped (a `<script>` or `<img onerror>` the model writes shows as text) and images as
// plain links (nothing loads from an address the model chose); DOMPurify then sanitizes the
// result (a `javascript:` URL is dropped), and every link opens in a new tab with
// rel="noopener noreferrer". Code blocks are highlighted by highlight.js (core + a few
// languages) and get a copy button.
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import { smallButton } from './dom.js';
import hljs from 'highlight.js/lib/core';
import javascript from 'highlight.js/lib/languages/javascript';
import typescript from 'highlight.js/lib/languages/typescript';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import json from 'highlight.js/lib/languages/json';
import bash from 'highlight.js/lib/languages/bash';
import cpp from 'highlight.js/lib/languages/cpp';
import xml from 'highlight.js/lib/languages/xml';

for (const [name, lang] of Object.entries({ javascript, typescript, python, rust, json, bash, cpp, xml })) {
  hljs.registerLanguage(name, lang);
}
hljs.registerAliases(['c', 'h', 'cc'], { languageName: 'cpp' });
hljs.registerAliases(['sh', 'shell', 'zsh', 'console'], { languageName: 'bash' });

const escape = (s) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    // Raw HTML in the model's text is shown, never parsed.
    html: ({ text }) => escape(text),
    image: ({ href, text }) => `<a href="${escape(href ?? '')}">${escape(text || href || 'image')}</a>`,
    code({ text, lang }) {
      const language = (lang ?? '').trim().split(/\s/)[0].toLowerCase();
      const known = language && hljs.getLanguage(language);
      const body = known ? hljs.highlight(text, { language, ignoreIllegals: true }).value : escape(text);
      return `<pre data-lang="${escape(known ? language : '')}"><code class="hljs">${body}</code></pre>`;
    },
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    if (node.hasAttribute('href')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
  }
});

const PURIFY = {
  FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'svg', 'math', 'video', 'audio'],
  FORBID_ATTR: ['style'],
};

/** Render `text` (markdown from the model) into `el`. */
export function renderMarkdown(el, text) {
  el.innerHTML = DOMPurify.sanitize(marked.parse(text), PURIFY);
  for (const pre of el.querySelectorAll('pre')) {
    const bar = document.createElement('div');
    bar.className = 'code-bar';
    const lang = document.createElement('span');
    lang.textContent = pre.dataset.lang || 'code';
    const label = `Copy the ${pre.dataset.lang || ''} code`.replace('  ', ' ');
    const copy = smallButton('copy-code', 'Copy', label, () => copyText(pre.querySelector('code').textContent, copy), 'small');
    bar.append(lang, copy);
    pre.before(bar);
    const wrap = document.createElement('div');
    wrap.className = 'code';
    bar.before(wrap);
    wrap.append(bar, pre);
  }
}

/** Copy `text`, and say so on `button` for a moment. */
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Copy failed';
  }
  setTimeout(() => (button.textContent = 'Copy'), 1500);
}

// The chat app's start: the page follows the app's state, the controllers wire their
// controls (the model, the chat, the conversations), the open conversation is drawn, then
// the models, and the service worker is registered. The layers, each importing only those
// below it: controllers/ (the flows) → components/ (the page's parts) → stores/ (state,
// IndexedDB, localStorage; no page) → services/ (the model's Worker).
import './style.css';
import { app, onState, setState } from './stores/app.js';
import { drawState, clearError } from './components/status.js';
import { renderMarkdown } from './components/markdown.js';
import { scrollToEnd } from './components/messages.js';
import { showModels, wireModels } from './controllers/model.js';
import { wireChat } from './controllers/chat.js';
import { start, wireConversations } from './controllers/conversations.js';

// For tests and the curious: the app's state and model, and the renderer model output
// goes through (an XSS test can feed it text directly).
window.pocketApp = app;
app.renderMarkdown = renderMarkdown;

onState(drawState);
wireModels();
wireChat();
wireConversations();
document.getElementById('dismiss-error').onclick = clearError;

// The open conversation (or a new one), then the cache's state, then the model when asked.
// (body[data-state] is "starting" in the HTML: "idle" says the controls work.)
setState('idle');
await start();
showModels();
scrollToEnd();

// The service worker: the app opens offline after one visit (sw.js). Not in Vite's dev server.
// On a host that sends no COOP/COEP headers, the worker adds them: the page reloads once
// when the worker takes control, so it is cross-origin isolated (threads for the CPU backend).
if ('serviceWorker' in navigator && !import.meta.env.DEV) {
  navigator.serviceWorker.register('./sw.js').catch((e) => console.warn('pocketrt chat: no service worker:', e.message));
  if (!window.crossOriginIsolated && !sessionStorage.getItem('pocketrt-chat:isolating')) {
    navigator.serviceWorker.addEventListener('controllerchange', () => {
      if (app.state === 'loading' || app.state === 'generating') return;
      sessionStorage.setItem('pocketrt-chat:isolating', '1');
      location.reload();
    });
  }
}

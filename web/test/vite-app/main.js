// The npm package imported by name in an app that Vite bundles (tests: vite_build...).
import { Pocket, hasWebGPU } from 'pocketrt';

window.Pocket = Pocket;
document.getElementById('status').textContent = hasWebGPU() ? 'ready' : 'no-webgpu';

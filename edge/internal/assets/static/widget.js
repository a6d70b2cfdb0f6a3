/* spookat launcher: draws a button; loads the chat only on intent (hover, focus, touch, click),
   or at once for a visitor with a conversation (its unread replies show on the launcher). */
(function(d,w){
var s=d.currentScript,k=s&&s.getAttribute('data-site');if(!k||w.__spookatL)return;w.__spookatL=1;
var b=s.src.replace(/\/widget\.js([?#].*)?$/,''),h=d.createElement('div'),r=h.attachShadow({mode:'open'}),p,o,
L=s.getAttribute('data-position')==='left',C=/^#[0-9a-f]{6}$/i.test(s.getAttribute('data-color'))?s.getAttribute('data-color'):'';
h.id='spookat-widget';
r.innerHTML='<style>:host{all:initial}#l{position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;background:#4f46e5;color:#fff;cursor:pointer;box-shadow:0 4px 14px rgba(0,0,0,.3);z-index:2147483000;display:flex;align-items:center;justify-content:center}#l:focus-visible{outline:3px solid #a5b4fc;outline-offset:2px}svg{width:28px;height:28px}</style><button id="l" type="button" aria-label="Open chat" aria-expanded="false" part="launcher"><svg viewBox="0 0 24 24" fill="currentColor" aria-hidden="true"><path d="M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2z"/></svg></button>';
var n=r.getElementById('l');if(L)n.style.cssText='left:20px;right:auto';if(C)n.style.background=C;
var q=w.spookat&&w.spookat.q||[],hs={};
function l(){return p||(p=new Promise(function(y,x){var e=d.createElement('script');e.src=b+'/v1/widget/chat.js?v=__V__';e.async=true;e.onload=function(){o=o||w.__spookatChat({base:b,site:k,root:r,button:n,sound:s.hasAttribute('data-sound'),lang:s.getAttribute('data-lang'),left:L,color:C,emit:function(e,v){(hs[e]||[]).forEach(function(f){try{f(v)}catch(x){}})}});y(o)};e.onerror=function(){p=0;x()};d.head.appendChild(e)}))}
['mouseenter','focus','touchstart'].forEach(function(e){n.addEventListener(e,function(){l().catch(function(){})},{passive:true})});
n.addEventListener('click',function(){l().then(function(c){c.toggle()},function(){n.title='The chat could not load; try again.'})});
function a(){d.body.appendChild(h);try{JSON.parse(localStorage.getItem('spookat:'+k)).conv&&l().catch(function(){})}catch(e){}}
d.body?a():d.addEventListener('DOMContentLoaded',a);
/* The host page's API, queued before this script runs: spookat('open'), spookat('on','message',fn)... */
function api(c,v,f){if(c==='on'){(hs[v]=hs[v]||[]).push(f);return}
if(c==='shutdown'){try{localStorage.removeItem('spookat:'+k)}catch(e){}o&&o.call(c);return}
l().then(function(x){x.call(c,v)})}
w.spookat=api;q.forEach(function(x){api.apply(0,x)});
})(document,window);
